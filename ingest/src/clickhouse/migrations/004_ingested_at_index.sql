-- Lets a read of recent records skip the parts and granules written before them: a window's
-- records and their later copies (ingest/src/analytics/record-sql.ts lastCopies) are found in
-- the newest data without reading a month's partition. MATERIALIZE builds it for rows already
-- stored (in the background on a server); statements are idempotent.
ALTER TABLE {database}.usage_records_sandbox ADD INDEX IF NOT EXISTS ingested_at_minmax ingested_at TYPE minmax GRANULARITY 1;
ALTER TABLE {database}.usage_records_live ADD INDEX IF NOT EXISTS ingested_at_minmax ingested_at TYPE minmax GRANULARITY 1;
ALTER TABLE {database}.usage_records_sandbox MATERIALIZE INDEX ingested_at_minmax;
ALTER TABLE {database}.usage_records_live MATERIALIZE INDEX ingested_at_minmax;
