-- Usage by customer for analytics (docs/analytics.md, rollups): per slot and customer, sorted by
-- customer so a few customers' slots are read without the rest; and per UTC day and customer,
-- to rank customers over a range from a day's row each. Built with the slot and day rollups.
CREATE TABLE IF NOT EXISTS {database}.usage_rollup_customers_sandbox
(
    provider_id LowCardinality(String),
    meter_ref LowCardinality(String),
    customer_ref String,
    slot DateTime('UTC'),
    calls UInt64,
    units Decimal(38, 9),
    errors UInt64,
    version DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(slot)
ORDER BY (provider_id, meter_ref, customer_ref, slot);

CREATE TABLE IF NOT EXISTS {database}.usage_rollup_customers_live AS {database}.usage_rollup_customers_sandbox;

CREATE TABLE IF NOT EXISTS {database}.usage_rollup_customer_days_sandbox
(
    provider_id LowCardinality(String),
    meter_ref LowCardinality(String),
    day Date,
    customer_ref String,
    calls UInt64,
    version DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (provider_id, meter_ref, day, customer_ref);

CREATE TABLE IF NOT EXISTS {database}.usage_rollup_customer_days_live AS {database}.usage_rollup_customer_days_sandbox;
