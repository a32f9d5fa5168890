-- Keys that sign customer access tokens. The proxy verifies with the public halves, published to
-- the snapshot store; retired keys stay published until the tokens they signed have expired.
CREATE TABLE signing_keys (
    kid text PRIMARY KEY,
    algorithm text NOT NULL,
    private_jwk jsonb NOT NULL,
    public_jwk jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    retired_at timestamptz
);
