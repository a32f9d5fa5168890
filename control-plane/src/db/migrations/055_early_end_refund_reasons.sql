-- The words an early end's refund was asked of the processor with (its `refund_reason`, which
-- names the plans): a retry within the hold asks with the same ones, whatever the plans are
-- called by then, since Stripe refuses a key reused with other parameters. Null in rows kept
-- before this column: their retry words the reason afresh.
ALTER TABLE early_end_refunds ADD COLUMN reason text;
