-- An unpaid final-usage invoice (its purchase has ended, so there is no purchase dunning to
-- retry it) is charged again on the dunning schedule: next_retry_at is when, or null when no
-- retry is due (paid, void, uncollectible, or an invoice purchase dunning retries).
ALTER TABLE invoices ADD COLUMN next_retry_at timestamptz;
CREATE INDEX invoices_retry_due ON invoices (next_retry_at) WHERE status = 'open' AND next_retry_at IS NOT NULL;
