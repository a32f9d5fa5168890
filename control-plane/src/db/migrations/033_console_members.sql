-- The console's people (issue 62): one account per email, members of providers with a role, and
-- their signed-in browsers. API keys are untouched: the console calls the same API, as a member.
CREATE TABLE console_users (
    id text PRIMARY KEY,
    -- Lower-cased; one account per address, whatever providers it belongs to.
    email text NOT NULL UNIQUE,
    password_hash text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE provider_members (
    provider_id text NOT NULL REFERENCES providers (id),
    user_id text NOT NULL REFERENCES console_users (id),
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
    created_at timestamptz NOT NULL,
    PRIMARY KEY (provider_id, user_id)
);
CREATE INDEX provider_members_user ON provider_members (user_id);

-- A session is its cookie's secret, stored as its SHA-256 only; it ends when signed out
-- (revoked_at), after its absolute lifetime (expires_at), or after an idle spell (last_seen_at).
CREATE TABLE console_sessions (
    id text PRIMARY KEY,
    token_hash text NOT NULL UNIQUE,
    -- Sent back in X-CSRF-Token with every call that changes something.
    csrf_token text NOT NULL,
    user_id text NOT NULL REFERENCES console_users (id),
    provider_id text NOT NULL REFERENCES providers (id),
    address text,
    user_agent text,
    created_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX console_sessions_user ON console_sessions (user_id) WHERE revoked_at IS NULL;
