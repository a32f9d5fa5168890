-- Mail to a provider's customers about their billing (docs/billing.md, "Emails to customers"):
-- which kinds a provider sends, per environment (none until it turns them on), and each mail,
-- written with the event that calls for it, in the same transaction, and sent after the commit
-- by the scheduler's pass. One mail per event (event_id is unique). status: pending (next_attempt_at
-- is when it is tried, or a lease while it is being sent), sent, skipped (nobody to send it to:
-- no address, or the customer deleted) or failed (every attempt refused).
CREATE TABLE customer_email_settings (
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    kinds text[] NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (provider_id, environment)
);

CREATE TABLE customer_mails (
    id text PRIMARY KEY,
    event_id text NOT NULL UNIQUE,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL,
    kind text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'sent', 'skipped', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    to_address text,
    subject text,
    last_error text,
    created_at timestamptz NOT NULL,
    sent_at timestamptz
);
CREATE INDEX customer_mails_due ON customer_mails (next_attempt_at) WHERE status = 'pending';
CREATE INDEX customer_mails_customer ON customer_mails (provider_id, environment, customer_id, created_at DESC, id DESC);
CREATE INDEX customer_mails_tenant ON customer_mails (provider_id, environment, created_at DESC, id DESC);
