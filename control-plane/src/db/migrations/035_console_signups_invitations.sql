-- Console sign-up proven by a mailed code, and invitations to a provider's team (issue 62).

-- A sign-up waiting for its code: nothing else exists until the code comes back.
CREATE TABLE console_signups (
    id text PRIMARY KEY,
    -- Lower-cased.
    email text NOT NULL,
    -- The argon2id hash of the chosen password; the password itself is never kept.
    password_hash text NOT NULL,
    -- The business the new provider is named after.
    business_name text NOT NULL,
    -- SHA-256 of the id and the six-digit code.
    code_hash text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    created_at timestamptz NOT NULL
);

-- An invitation mailed to an address: its link's secret is stored as SHA-256 only. It is open
-- until accepted, revoked or expired; one open invitation per provider and address.
CREATE TABLE console_invitations (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    email text NOT NULL,
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
    token_hash text NOT NULL UNIQUE,
    -- Null when a secret key sent it.
    invited_by text REFERENCES console_users (id),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    accepted_at timestamptz,
    accepted_by text REFERENCES console_users (id),
    revoked_at timestamptz
);
CREATE INDEX console_invitations_provider ON console_invitations (provider_id, id DESC);
CREATE UNIQUE INDEX console_invitations_open ON console_invitations (provider_id, email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
