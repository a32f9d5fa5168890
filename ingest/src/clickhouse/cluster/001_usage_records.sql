-- The usage tables on a ClickHouse cluster (CLICKHOUSE_CLUSTER names it; Keeper required): the
-- same columns, order and deduplication as the single-server DDL (../migrations), as replicated
-- local tables on every node and, under the names the services read and write, distributed
-- tables over them. {shard} and {replica} are the servers' own macros; {database} and
-- {cluster} are filled in by migrateClickHouse.
-- Rows are sharded by (provider_id, customer_ref), a prefix of the sorting key: every copy of a
-- record (same id, so same provider and customer) lands on one shard, where FINAL collapses it,
-- and a customer's usage is summed on one shard.
CREATE TABLE IF NOT EXISTS {database}.usage_records_sandbox_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/usage_records_sandbox_local', '{replica}')
PARTITION BY toYYYYMM(timestamp)
ORDER BY (provider_id, meter_ref, customer_ref, id);

CREATE TABLE IF NOT EXISTS {database}.usage_records_live_local ON CLUSTER '{cluster}'
AS {database}.usage_records_sandbox_local
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/usage_records_live_local', '{replica}')
PARTITION BY toYYYYMM(timestamp)
ORDER BY (provider_id, meter_ref, customer_ref, id);

CREATE TABLE IF NOT EXISTS {database}.usage_records_sandbox ON CLUSTER '{cluster}'
AS {database}.usage_records_sandbox_local
ENGINE = Distributed('{cluster}', '{database}', 'usage_records_sandbox_local', cityHash64(provider_id, customer_ref));

CREATE TABLE IF NOT EXISTS {database}.usage_records_live ON CLUSTER '{cluster}'
AS {database}.usage_records_live_local
ENGINE = Distributed('{cluster}', '{database}', 'usage_records_live_local', cityHash64(provider_id, customer_ref));
