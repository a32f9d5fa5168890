-- Refunds settle in two steps: pending when made (the money leaves the balance then), then
-- succeeded or failed (the money comes back) when the processor reports.
ALTER TABLE refunds ADD COLUMN settled_at timestamptz;
UPDATE refunds SET settled_at = created_at WHERE status <> 'pending';
CREATE INDEX refunds_pending ON refunds (created_at) WHERE status = 'pending';

ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check
    CHECK (kind IN ('payment', 'refund', 'refund_reversal', 'dispute', 'dispute_reversal', 'payout', 'payout_reversal', 'cost'));
