-- Live payments through a provider's own Stripe account. One connection per provider and
-- processor; the secret key and the webhook signing secret are sealed like origin API keys and
-- never shown again (only the key's last 4 characters).
CREATE TABLE processor_connections (
    provider_id text NOT NULL REFERENCES providers (id),
    processor text NOT NULL CHECK (processor IN ('stripe')),
    secret_key_sealed text NOT NULL,
    webhook_secret_sealed text NOT NULL,
    key_last4 text NOT NULL,
    -- Stripe's own mode of the key: a test-mode key lets a provider try live mode without money.
    key_mode text NOT NULL CHECK (key_mode IN ('live', 'test')),
    account text NOT NULL,
    connected_at timestamptz NOT NULL,
    PRIMARY KEY (provider_id, processor)
);

-- The processor's customer object a stored card belongs to (Stripe's cus_…; null in sandbox).
ALTER TABLE payment_methods ADD COLUMN processor_customer text;

-- Processor events applied, by the processor's event id: a redelivered event is acknowledged and
-- applied once. Written in the transaction that applies the event.
CREATE TABLE processor_events (
    provider_id text NOT NULL REFERENCES providers (id),
    processor text NOT NULL,
    event_id text NOT NULL,
    type text NOT NULL,
    outcome text NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (provider_id, processor, event_id)
);

-- Events name the processor's ids: find our rows by them.
CREATE INDEX payments_by_intent ON payments (provider_id, environment, processor_payment_intent);
CREATE INDEX refunds_by_processor ON refunds (provider_id, environment, processor_refund);
CREATE UNIQUE INDEX disputes_by_processor ON disputes (provider_id, environment, processor_dispute);
CREATE UNIQUE INDEX payouts_by_processor ON payouts (provider_id, environment, processor_payout);
