-- Customer sign-in: an OAuth 2.1 authorization server for MCP clients.

-- Clients registered dynamically (RFC 7591). One authorization server serves every provider, so a
-- client (an MCP host application) registers once; which provider a customer signs in to follows
-- from the MCP server named by the authorization request's resource.
CREATE TABLE oauth_clients (
    id text PRIMARY KEY,
    -- SHA-256 of the secret of a confidential client; NULL for a public one.
    secret_hash text,
    token_endpoint_auth_method text NOT NULL
        CHECK (token_endpoint_auth_method IN ('none', 'client_secret_post', 'client_secret_basic')),
    redirect_uris text[] NOT NULL,
    client_name text,
    client_uri text,
    logo_uri text,
    application_type text NOT NULL CHECK (application_type IN ('web', 'native')),
    created_at timestamptz NOT NULL
);

-- A customer's password for the hosted sign-in of one provider and environment (argon2id hash).
-- The email is kept lower-cased here; one sign-in account per email and tenant.
CREATE TABLE customer_logins (
    customer_id text PRIMARY KEY REFERENCES customers (id),
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    email text NOT NULL,
    password_hash text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX customer_logins_email ON customer_logins (provider_id, environment, email);

-- A grant: one sign-in of a customer through one client for one MCP server. Its refresh tokens
-- form a family; revoking the grant ends the family and the access tokens it issued.
CREATE TABLE oauth_grants (
    id text PRIMARY KEY,
    client_id text NOT NULL REFERENCES oauth_clients (id),
    customer_id text NOT NULL REFERENCES customers (id),
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    mcp_server_id text NOT NULL REFERENCES mcp_servers (id),
    resource text NOT NULL,
    scope text NOT NULL,
    revoked_at timestamptz,
    revoked_reason text,
    created_at timestamptz NOT NULL
);
CREATE INDEX oauth_grants_customer ON oauth_grants (customer_id);

-- Authorization codes, stored hashed: single use (used_at set by a guarded UPDATE), short-lived.
CREATE TABLE oauth_codes (
    code_hash text PRIMARY KEY,
    grant_id text NOT NULL REFERENCES oauth_grants (id),
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);

-- Refresh tokens, stored hashed, rotated on every use: a used one presented again is a reuse and
-- revokes its grant.
CREATE TABLE oauth_refresh_tokens (
    token_hash text PRIMARY KEY,
    grant_id text NOT NULL REFERENCES oauth_grants (id),
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    created_at timestamptz NOT NULL
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);

-- Failed sign-ins per key (an account, or an address) in a window: past the limit, sign-in is
-- refused until the window ends. Shared by every control-plane process.
CREATE TABLE sign_in_failures (
    key text PRIMARY KEY,
    failures integer NOT NULL,
    window_start timestamptz NOT NULL
);
