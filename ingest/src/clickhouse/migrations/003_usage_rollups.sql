-- Rollups of the usage records for analytics (issue 63, docs/analytics.md): closed 15-minute
-- slots (every time zone's hours and days are whole slots) rebuilt by ingest from the raw records
-- read with FINAL, so a record sent twice counts once here as it does in billing.
--
-- usage_rollup_*: calls, units, errors and an origin-latency histogram per slot and call shape
-- (tool, server, product, outcome). Keys of the histogram are log buckets of 2 % width (each
-- within 1 % of its values; ingest/src/analytics/latency.ts). A slot rolled again writes rows of
-- a later version; FINAL reads the newest.
CREATE TABLE IF NOT EXISTS {database}.usage_rollup_sandbox
(
    provider_id LowCardinality(String),
    meter_ref LowCardinality(String),
    slot DateTime('UTC'),
    tool String,
    server String,
    product String,
    outcome LowCardinality(String),
    calls UInt64,
    units Decimal(38, 9),
    errors UInt64,
    timed UInt64,
    latency Map(Int32, UInt64),
    version DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(slot)
ORDER BY (provider_id, meter_ref, slot, tool, server, product, outcome);

CREATE TABLE IF NOT EXISTS {database}.usage_rollup_live AS {database}.usage_rollup_sandbox;

-- usage_rollup_paywalls_*: paywalls shown per slot, form, era, checkout session and product.
CREATE TABLE IF NOT EXISTS {database}.usage_rollup_paywalls_sandbox
(
    provider_id LowCardinality(String),
    meter_ref LowCardinality(String),
    slot DateTime('UTC'),
    form LowCardinality(String),
    era LowCardinality(String),
    session String,
    product String,
    shown UInt64,
    first DateTime64(3, 'UTC'),
    version DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(slot)
ORDER BY (provider_id, meter_ref, slot, form, era, session, product);

CREATE TABLE IF NOT EXISTS {database}.usage_rollup_paywalls_live AS {database}.usage_rollup_paywalls_sandbox;

-- usage_slot_marks_*: written by the ingest consumer after each stored batch, one row per slot
-- the batch touched, at the store's clock. usage_slot_rolls_*: written by the rollup after it
-- rebuilt a slot, at the store's clock read before it read the records. A slot is answered from
-- the rollups only while its newest roll is no older than its newest mark.
CREATE TABLE IF NOT EXISTS {database}.usage_slot_marks_sandbox
(
    slot DateTime('UTC'),
    marked_at DateTime64(6, 'UTC') DEFAULT now64(6)
)
ENGINE = ReplacingMergeTree(marked_at)
ORDER BY slot;

CREATE TABLE IF NOT EXISTS {database}.usage_slot_marks_live AS {database}.usage_slot_marks_sandbox;

CREATE TABLE IF NOT EXISTS {database}.usage_slot_rolls_sandbox
(
    slot DateTime('UTC'),
    rolled_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(rolled_at)
ORDER BY slot;

CREATE TABLE IF NOT EXISTS {database}.usage_slot_rolls_live AS {database}.usage_slot_rolls_sandbox;

-- usage_rollup_days_*: per UTC day, tool and server: calls, errors and the latency histogram,
-- summed from a day's 96 slots once they are all rolled (a month of tools merges 30 histograms a
-- tool, not 2,880). usage_day_rolls_*: when each day was summed; a query uses a day only while
-- every slot of it is clean and none was rolled after the day was summed.
CREATE TABLE IF NOT EXISTS {database}.usage_rollup_days_sandbox
(
    provider_id LowCardinality(String),
    meter_ref LowCardinality(String),
    day Date,
    tool String,
    server String,
    calls UInt64,
    errors UInt64,
    latency Map(Int32, UInt64),
    version DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (provider_id, meter_ref, day, tool, server);

CREATE TABLE IF NOT EXISTS {database}.usage_rollup_days_live AS {database}.usage_rollup_days_sandbox;

CREATE TABLE IF NOT EXISTS {database}.usage_day_rolls_sandbox
(
    day Date,
    rolled_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(rolled_at)
ORDER BY day;

CREATE TABLE IF NOT EXISTS {database}.usage_day_rolls_live AS {database}.usage_day_rolls_sandbox;
