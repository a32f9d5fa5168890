-- Usage by plan (docs/analytics.md): the call-shape rollup gains the plan the call was judged by
-- (the record's planId; '' for records made before records carried it: old rows read '', a String's default).
-- The column joins the sorting key, which ClickHouse allows for a column added in the same ALTER.
ALTER TABLE {database}.usage_rollup_sandbox
    ADD COLUMN IF NOT EXISTS plan String,
    MODIFY ORDER BY (provider_id, meter_ref, slot, tool, server, product, outcome, plan);

ALTER TABLE {database}.usage_rollup_live
    ADD COLUMN IF NOT EXISTS plan String,
    MODIFY ORDER BY (provider_id, meter_ref, slot, tool, server, product, outcome, plan)
