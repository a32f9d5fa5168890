-- Every tenant-owned row carries (provider_id, environment): sandbox and live never share rows.

CREATE TABLE providers (
    id text PRIMARY KEY,
    display_name text NOT NULL,
    legal_name text NOT NULL,
    -- Live mode must be switched on for a provider; until then live keys answer 404
    -- provider_not_found_in_environment, like an account that has not finished activation.
    live_enabled boolean NOT NULL DEFAULT true,
    company_number text,
    country text,
    default_currency text,
    icon_url text,
    logo_url text,
    privacy_url text,
    terms_url text,
    statement_descriptor text,
    supported_topup_currencies text[],
    support_email text,
    support_url text,
    tax_id text,
    vat_number text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE api_keys (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    -- SHA-256 of the whole key; the key itself is shown once and never stored.
    key_hash bytea NOT NULL UNIQUE,
    key_hint text NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX api_keys_provider ON api_keys (provider_id, environment);

CREATE TABLE meters (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    name text NOT NULL,
    aggregation text NOT NULL CHECK (aggregation IN ('sum', 'count', 'max', 'unique_count')),
    value_property text,
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    UNIQUE (provider_id, environment, name)
);

CREATE TABLE products (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    reference text NOT NULL,
    name text NOT NULL,
    description text,
    product_type text NOT NULL,
    is_mcp_pay boolean NOT NULL DEFAULT false,
    metadata jsonb NOT NULL DEFAULT '{}',
    status text NOT NULL CHECK (status IN ('active', 'archived')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    UNIQUE (provider_id, environment, reference)
);

CREATE TABLE plans (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    product_id text NOT NULL REFERENCES products (id),
    meter_id text REFERENCES meters (id),
    name text NOT NULL,
    description text,
    type text NOT NULL CHECK (type IN ('recurring', 'one-time', 'usage-based', 'hybrid')),
    price bigint NOT NULL CHECK (price >= 0),
    currency text NOT NULL,
    billing_cycle text CHECK (billing_cycle IN ('weekly', 'monthly', 'quarterly', 'yearly', 'custom')),
    billing_interval_days integer,
    billing_model text NOT NULL CHECK (billing_model IN ('pre-paid', 'post-paid')),
    credits_per_unit integer NOT NULL CHECK (credits_per_unit >= 1),
    free_units bigint NOT NULL DEFAULT 0 CHECK (free_units >= 0),
    usage_limit bigint CHECK (usage_limit >= 0),
    base_price bigint NOT NULL DEFAULT 0 CHECK (base_price >= 0),
    setup_fee bigint NOT NULL DEFAULT 0 CHECK (setup_fee >= 0),
    trial_days integer NOT NULL DEFAULT 0 CHECK (trial_days >= 0),
    rollover_unused_units boolean NOT NULL DEFAULT false,
    auto_renew boolean NOT NULL,
    status text NOT NULL CHECK (status IN ('active', 'inactive', 'archived')),
    max_active_users integer,
    access_expiry_days integer,
    is_default boolean NOT NULL DEFAULT false,
    limits jsonb NOT NULL DEFAULT '{}',
    metadata jsonb NOT NULL DEFAULT '{}',
    features jsonb NOT NULL DEFAULT '{}',
    usage_tracking jsonb,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX plans_product ON plans (product_id, id);
-- At most one default plan per product among plans still on sale.
CREATE UNIQUE INDEX plans_one_default ON plans (product_id) WHERE is_default AND status <> 'archived';

CREATE TABLE mcp_servers (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    name text NOT NULL,
    -- Global: the proxy routes by subdomain before it knows the provider.
    subdomain text NOT NULL UNIQUE,
    url text NOT NULL,
    product_id text REFERENCES products (id),
    status text NOT NULL CHECK (status IN ('active', 'inactive', 'suspended')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX mcp_servers_provider ON mcp_servers (provider_id, environment, id);

-- Transactional outbox: every state change writes its event in the same transaction, so no
-- change can commit without its event (delivery to webhook endpoints reads from here).
CREATE TABLE outbox_events (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    type text NOT NULL,
    payload jsonb NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX outbox_events_provider ON outbox_events (provider_id, environment, created_at);
