-- Usage by one grouping at a time (docs/analytics.md, rollups): per slot, dimension (tool, server,
-- product, plan or outcome) and the record's value of it, the calls, units and errors. A series by tool reads a
-- month's slots times its tools, not times every combination of tool, product, plan and outcome.
-- The slots rolled before this table existed are marked, so the next roll rebuilds them from the
-- records (their plans are in no rollup); until then they are read from the records.
CREATE TABLE IF NOT EXISTS {database}.usage_rollup_groups_sandbox
(
    provider_id LowCardinality(String),
    meter_ref LowCardinality(String),
    dimension LowCardinality(String),
    slot DateTime('UTC'),
    key String,
    calls UInt64,
    units Decimal(38, 9),
    errors UInt64,
    version DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(slot)
ORDER BY (provider_id, meter_ref, dimension, slot, key);

CREATE TABLE IF NOT EXISTS {database}.usage_rollup_groups_live AS {database}.usage_rollup_groups_sandbox;

INSERT INTO {database}.usage_slot_marks_sandbox (slot) SELECT DISTINCT slot FROM {database}.usage_slot_rolls_sandbox;

INSERT INTO {database}.usage_slot_marks_live (slot) SELECT DISTINCT slot FROM {database}.usage_slot_rolls_live
