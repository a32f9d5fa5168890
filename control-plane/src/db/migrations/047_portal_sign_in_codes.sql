-- Signing in to the customer portal by a code mailed to the customer's address (issue 64), with
-- no password: a row per code asked for, whether or not the address has an account here (so the
-- page tells nobody which addresses are known); customer_id is null when it has none, and such a
-- code never signs anyone in. Only the SHA-256 of the id and code is kept; attempts are counted
-- by a guarded UPDATE, and used_at makes a code single-use.
CREATE TABLE portal_sign_in_codes (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    email text NOT NULL,
    customer_id text REFERENCES customers (id),
    code_hash text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    created_at timestamptz NOT NULL
);
