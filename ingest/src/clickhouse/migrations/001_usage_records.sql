-- Raw usage records, one table per environment so sandbox and live can never meet in a query.
-- ReplacingMergeTree on the record identity makes replays and resends count once: every read
-- uses FINAL, so duplicates not yet merged away are still collapsed at query time.
-- ORDER BY leads with the tenant and meter (every query filters on both), then the customer
-- (per-customer limit checks and billing), then the record id (the dedupe identity).
CREATE TABLE IF NOT EXISTS {database}.usage_records_sandbox
(
    provider_id LowCardinality(String),
    meter_ref LowCardinality(String),
    meter_name LowCardinality(String),
    customer_ref String,
    id String,
    timestamp DateTime64(3, 'UTC'),
    value Decimal(38, 9),
    properties String,
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (provider_id, meter_ref, customer_ref, id);

CREATE TABLE IF NOT EXISTS {database}.usage_records_live AS {database}.usage_records_sandbox;
