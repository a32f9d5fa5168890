-- Usage per slot, every call of a meter together (docs/analytics.md, rollups): a row a slot, so
-- a month's totals read 2,880 rows however many tools and customers there are (the series
-- without grouping, and the whole range beside the largest customers). Built with the slot
-- rollup; the slots rolled before this table existed are filled from it, at their roll's version.
CREATE TABLE IF NOT EXISTS {database}.usage_rollup_totals_sandbox
(
    provider_id LowCardinality(String),
    meter_ref LowCardinality(String),
    slot DateTime('UTC'),
    calls UInt64,
    units Decimal(38, 9),
    errors UInt64,
    version DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(slot)
ORDER BY (provider_id, meter_ref, slot);

CREATE TABLE IF NOT EXISTS {database}.usage_rollup_totals_live AS {database}.usage_rollup_totals_sandbox;

INSERT INTO {database}.usage_rollup_totals_sandbox
SELECT provider_id, meter_ref, slot, sum(calls), sum(units), sum(errors), max(version)
  FROM {database}.usage_rollup_sandbox FINAL
 GROUP BY provider_id, meter_ref, slot;

INSERT INTO {database}.usage_rollup_totals_live
SELECT provider_id, meter_ref, slot, sum(calls), sum(units), sum(errors), max(version)
  FROM {database}.usage_rollup_live FINAL
 GROUP BY provider_id, meter_ref, slot
