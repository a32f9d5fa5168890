-- Which SECRET_KEY a signing key is sealed under (a fingerprint, never the secret): a control
-- plane signs with its own key and leaves keys sealed under another secret alone, so services
-- that disagree on the secret (a misconfiguration, or tests sharing one database) never retire
-- each other's keys.
ALTER TABLE signing_keys ADD COLUMN secret_id text;
