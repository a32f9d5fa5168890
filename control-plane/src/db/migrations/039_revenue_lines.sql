-- What each revenue entry was paid for, so revenue analytics can tell recurring fees from usage,
-- one-time charges and credit top-ups: the kind of the invoice line it came from, or top_up for
-- a credit pack; null for a payment's part no line names (earned when received).
ALTER TABLE ledger_entries ADD COLUMN revenue_line text
    CHECK (revenue_line IN ('base', 'setup_fee', 'usage', 'late_usage', 'proration', 'proration_refund',
                            'credits_applied', 'top_up')),
    ADD CONSTRAINT ledger_entries_revenue_line_account CHECK (revenue_line IS NULL OR account = 'revenue');

-- The entries so far: ledger rows are otherwise never changed, so the guard is lifted for this
-- one backfill, inside the migration's transaction.
ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only;
UPDATE ledger_entries e SET revenue_line = 'top_up'
  FROM payments p
 WHERE e.account = 'revenue' AND p.id = e.payment_id AND p.reason = 'topup';
-- An invoice's line of the same amount (and service period, when the entry has one); of lines
-- alike, the first.
UPDATE ledger_entries e
   SET revenue_line = (
         SELECT l.line ->> 'kind'
           FROM payments p
           JOIN invoices i ON i.id = p.invoice_id
          CROSS JOIN jsonb_array_elements(i.lines) WITH ORDINALITY AS l (line, n)
          WHERE p.id = e.payment_id AND (l.line ->> 'amount')::bigint = -e.amount
            AND (e.recognition_start IS NULL
                 OR ((l.line #>> '{period,start}')::timestamptz = e.recognition_start
                     AND (l.line #>> '{period,end}')::timestamptz = e.recognition_end))
          ORDER BY n
          LIMIT 1)
 WHERE e.account = 'revenue' AND e.revenue_line IS NULL AND e.payment_id IS NOT NULL;
ALTER TABLE ledger_entries ENABLE TRIGGER ledger_append_only;

