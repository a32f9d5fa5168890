-- Whether a record's sender chose its id (the usage API's `id`; `idGiven` on the bus): only such
-- a record can come again under another time, so the rollups' looks for moved copies
-- (ingest/src/analytics/rollups.ts markMoved) read only these, not every record the proxy made.
-- The consumer writes it for every row. Rows stored before this column existed, and any row
-- written without it, read true: they may have been given, and are looked for as before.
ALTER TABLE {database}.usage_records_sandbox ADD COLUMN IF NOT EXISTS id_given Bool DEFAULT true;
ALTER TABLE {database}.usage_records_live ADD COLUMN IF NOT EXISTS id_given Bool DEFAULT true;
