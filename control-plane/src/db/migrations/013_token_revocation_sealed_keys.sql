-- Signing keys' private halves are stored sealed with SECRET_KEY, like origin keys; rows written
-- in plain text before this migration are sealed by the control plane when it next reads them.
ALTER TABLE signing_keys ADD COLUMN private_jwk_sealed text;
ALTER TABLE signing_keys ALTER COLUMN private_jwk DROP NOT NULL;

-- Customers whose access tokens are revoked: tokens issued at or before revoked_before are
-- refused by the proxy (published to the snapshot store; rebuilt from here at start).
CREATE TABLE token_revocations (
    customer_id text PRIMARY KEY REFERENCES customers (id),
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    revoked_before timestamptz NOT NULL
);
