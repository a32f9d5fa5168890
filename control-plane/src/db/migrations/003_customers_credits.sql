-- Customers of a provider. Deleting keeps the row (purchases and the credit ledger point at it)
-- but frees its externalRef and hides it from every read.
CREATE TABLE customers (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    external_ref text,
    name text,
    email text,
    telephone text,
    status text NOT NULL CHECK (status IN ('active', 'inactive', 'deleted')),
    metadata jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX customers_external_ref ON customers (provider_id, environment, external_ref)
    WHERE external_ref IS NOT NULL AND status <> 'deleted';
CREATE INDEX customers_provider ON customers (provider_id, environment, id);
CREATE INDEX customers_email ON customers (provider_id, environment, lower(email));

-- The credit ledger is append-only: every movement is a row with the balance after it. The
-- balance row is the ledger's running total, updated in the same transaction under a row lock.
CREATE TABLE credit_balances (
    customer_id text PRIMARY KEY REFERENCES customers (id),
    balance bigint NOT NULL CHECK (balance >= 0),
    updated_at timestamptz NOT NULL
);

CREATE TABLE credit_ledger (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL REFERENCES customers (id),
    kind text NOT NULL CHECK (kind IN ('top_up', 'grant', 'debit', 'adjustment')),
    amount bigint NOT NULL CHECK (amount <> 0),
    balance_after bigint NOT NULL CHECK (balance_after >= 0),
    reason text,
    product_ref text,
    idempotency_key text,
    metadata jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL
);
CREATE INDEX credit_ledger_customer ON credit_ledger (customer_id, id);
-- A movement retried with its key is written once, whatever happens to the HTTP layer.
CREATE UNIQUE INDEX credit_ledger_idempotency ON credit_ledger (provider_id, environment, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Below this many credits a customer's balance is "low" (customer.credit.low_balance).
ALTER TABLE providers ADD COLUMN low_balance_threshold bigint NOT NULL DEFAULT 100 CHECK (low_balance_threshold >= 0);

-- Stored responses of POSTs sent with an Idempotency-Key (kept 24 hours).
CREATE TABLE idempotency_keys (
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    key text NOT NULL,
    method text NOT NULL,
    path text NOT NULL,
    request_hash text NOT NULL,
    state text NOT NULL CHECK (state IN ('in_progress', 'done')),
    response_status integer,
    response_body text,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (provider_id, environment, key)
);
