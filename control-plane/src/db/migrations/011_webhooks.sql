-- Webhook endpoints of a provider in one environment. An empty enabled_events means every type,
-- including types added later.
CREATE TABLE webhook_endpoints (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    url text NOT NULL,
    description text,
    enabled_events text[] NOT NULL DEFAULT '{}',
    status text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    disabled_reason text,
    consecutive_failures integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz
);
CREATE INDEX webhook_endpoints_provider ON webhook_endpoints (provider_id, environment) WHERE deleted_at IS NULL;

-- Signing secrets, sealed with the deployment secret. During a rotation the old secret keeps
-- signing (a second v1= entry) until expires_at.
CREATE TABLE webhook_secrets (
    id text PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (id),
    sealed_secret text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz
);
CREATE INDEX webhook_secrets_endpoint ON webhook_secrets (endpoint_id);

-- One delivery per (event, endpoint): created with the event, in the producer's transaction.
-- locked_until leases the one attempt in flight to one worker (longer than the 10 s timeout).
CREATE TABLE webhook_deliveries (
    id text PRIMARY KEY,
    event_id text NOT NULL REFERENCES outbox_events (id),
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (id),
    status text NOT NULL CHECK (status IN ('pending', 'succeeded')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    locked_until timestamptz,
    last_status_code integer,
    last_error text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at);

-- Every attempt, for the log providers query: what was sent and what came back.
CREATE TABLE webhook_attempts (
    id text PRIMARY KEY,
    delivery_id text REFERENCES webhook_deliveries (id),
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (id),
    event_id text NOT NULL,
    event_type text NOT NULL,
    attempt integer NOT NULL,
    succeeded boolean NOT NULL,
    status_code integer,
    latency_ms integer NOT NULL,
    error text,
    response_excerpt text,
    next_attempt_at timestamptz,
    created_at timestamptz NOT NULL
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, created_at DESC);
CREATE INDEX webhook_attempts_event ON webhook_attempts (event_id, created_at DESC);
