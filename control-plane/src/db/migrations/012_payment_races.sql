-- A checkout session is paid by one request at a time: the payer claims it until paying_until
-- (a lease, so a crashed payer does not hold it forever) with a guarded UPDATE.
ALTER TABLE checkout_sessions ADD COLUMN paying_until timestamptz;

-- Charges without a purchase (top-ups) were not covered by payments_once_per_attempt, whose key
-- holds purchase_id and so never conflicts on NULL. Each top-up attempt is unique per customer
-- and session, and a session has at most one successful top-up payment.
CREATE UNIQUE INDEX payments_once_per_topup_attempt ON payments (customer_id, period_key, attempt)
    WHERE purchase_id IS NULL;
CREATE UNIQUE INDEX payments_one_topup_success ON payments (period_key)
    WHERE reason = 'topup' AND status = 'succeeded';
