-- Proof that a person reads an email address, before sign-up sets a password for it: a one-time
-- code is mailed, and only its holder finishes the sign-up. This is what lets sign-up attach to a
-- customer the provider created through the API, or set a new password for an existing account,
-- without letting anyone take over an address they do not read.
CREATE TABLE email_verifications (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    -- Lower-cased, as in customer_logins.
    email text NOT NULL,
    name text,
    -- The argon2id hash of the password chosen with the sign-up; the password itself is never kept.
    password_hash text NOT NULL,
    -- The authorization request to resume once the code is entered (client, redirect, PKCE, resource).
    request jsonb NOT NULL,
    -- SHA-256 of the id and the six-digit code.
    code_hash text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    created_at timestamptz NOT NULL
);
