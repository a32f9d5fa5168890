-- The customer portal (issue 64). portal_links: a link a provider made for one customer
-- (POST /v1/sdk/portal-sessions), single-use and valid for minutes, as Stripe's billing portal
-- sessions are; only its token's SHA-256 is kept. portal_sessions: the customer's browser once
-- the link was opened, held by an HttpOnly cookie (its token's SHA-256 kept), with the CSRF
-- token its forms carry.
CREATE TABLE portal_links (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL REFERENCES customers (id),
    token_hash text NOT NULL UNIQUE,
    return_url text,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    created_at timestamptz NOT NULL
);

CREATE TABLE portal_sessions (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL REFERENCES customers (id),
    token_hash text NOT NULL UNIQUE,
    csrf_token text NOT NULL,
    return_url text,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL
);
