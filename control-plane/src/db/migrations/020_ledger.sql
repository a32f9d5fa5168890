-- The double-entry ledger: every money movement of a provider, in integer minor units. Debits
-- are positive, credits negative, and the entries of one transaction sum to zero (checked at
-- commit by the trigger below). Rows are only ever inserted.
--
-- Accounts: processor_balance (the provider's money held at the processor), bank (paid out),
-- revenue (payments; credit entries carry the service period they pay for), refunds and
-- disputes (contra-revenue), platform_fees (the platform's fee), costs (cost of revenue).
CREATE TABLE ledger_entries (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    transaction_id text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('payment', 'refund', 'dispute', 'dispute_reversal', 'payout', 'payout_reversal', 'cost')),
    account text NOT NULL CHECK (account IN ('processor_balance', 'bank', 'revenue', 'refunds', 'disputes', 'platform_fees', 'costs')),
    amount bigint NOT NULL,
    currency text NOT NULL,
    customer_id text,
    payment_id text,
    source_id text NOT NULL,
    description text NOT NULL,
    -- Revenue entries: the service period the money pays for, recognised evenly over it (null:
    -- recognised when received).
    recognition_start timestamptz,
    recognition_end timestamptz,
    occurred_at timestamptz NOT NULL,
    CHECK ((recognition_start IS NULL) = (recognition_end IS NULL)),
    CHECK (recognition_end IS NULL OR recognition_end > recognition_start)
);
CREATE INDEX ledger_entries_time ON ledger_entries (provider_id, environment, occurred_at, transaction_id);
CREATE INDEX ledger_entries_transaction ON ledger_entries (transaction_id);

CREATE FUNCTION ledger_transaction_balances() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT sum(amount) FROM ledger_entries WHERE transaction_id = NEW.transaction_id) <> 0 THEN
        RAISE EXCEPTION 'ledger transaction % does not balance', NEW.transaction_id;
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER ledger_balanced AFTER INSERT ON ledger_entries
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_transaction_balances();

CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger entries are never changed or removed';
END $$;
CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- Money that moved before the ledger existed: succeeded payments (no platform fee was taken)
-- and succeeded refunds.
INSERT INTO ledger_entries (id, provider_id, environment, transaction_id, kind, account, amount, currency, customer_id,
                            payment_id, source_id, description, occurred_at)
SELECT 'le_' || md5(p.id || side.account), p.provider_id, p.environment, p.transaction_reference, 'payment', side.account,
       side.sign * p.amount, p.currency, p.customer_id, p.id, p.id, 'Payment (' || p.reason || ')', p.created_at
  FROM payments p
 CROSS JOIN (VALUES ('processor_balance', 1), ('revenue', -1)) AS side (account, sign)
 WHERE p.status = 'succeeded' AND p.amount > 0;

INSERT INTO ledger_entries (id, provider_id, environment, transaction_id, kind, account, amount, currency, customer_id,
                            payment_id, source_id, description, occurred_at)
SELECT 'le_' || md5(r.id || side.account), r.provider_id, r.environment, 'txn_' || upper(substr(md5(r.id), 1, 26)), 'refund',
       side.account, side.sign * r.amount, r.currency, p.customer_id, p.id, r.id, 'Refund', r.created_at
  FROM refunds r
  JOIN payments p ON p.id = r.payment_id
 CROSS JOIN (VALUES ('refunds', 1), ('processor_balance', -1)) AS side (account, sign)
 WHERE r.status = 'succeeded';
