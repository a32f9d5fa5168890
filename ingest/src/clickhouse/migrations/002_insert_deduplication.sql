-- Lets insert_deduplication_token work on these (non-replicated) tables: a batch replayed after
-- a crash between the insert and the offset commit carries the same token and is dropped whole.
ALTER TABLE {database}.usage_records_sandbox MODIFY SETTING non_replicated_deduplication_window = 10000;
ALTER TABLE {database}.usage_records_live MODIFY SETTING non_replicated_deduplication_window = 10000;
