-- Usage per slot and customer sorted by slot (docs/analytics.md, rollups): the same rows as the
-- customer rollup of 005, which is sorted by customer so a few customers' slots are read without
-- the rest. Questions about some slots of every customer (the partial days at a range's ends when
-- customers are ranked, a UTC day summed, the groups a rebuild no longer has) read this one: the
-- slots' rows, not the slot column of the month's every row. Filled from the customer rollup at
-- its rows' versions; a rebuild writes this table first and the customer rollup from it.
CREATE TABLE IF NOT EXISTS {database}.usage_rollup_customer_slots_sandbox
(
    provider_id LowCardinality(String),
    meter_ref LowCardinality(String),
    slot DateTime('UTC'),
    customer_ref String,
    calls UInt64,
    units Decimal(38, 9),
    errors UInt64,
    version DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(slot)
ORDER BY (provider_id, meter_ref, slot, customer_ref);

CREATE TABLE IF NOT EXISTS {database}.usage_rollup_customer_slots_live AS {database}.usage_rollup_customer_slots_sandbox;

INSERT INTO {database}.usage_rollup_customer_slots_sandbox
SELECT provider_id, meter_ref, slot, customer_ref, calls, units, errors, version
  FROM {database}.usage_rollup_customers_sandbox FINAL;

INSERT INTO {database}.usage_rollup_customer_slots_live
SELECT provider_id, meter_ref, slot, customer_ref, calls, units, errors, version
  FROM {database}.usage_rollup_customers_live FINAL
