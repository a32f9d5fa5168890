-- API keys managed in the console (issue 62): a name to tell them apart, who made each, and an
-- expiry for the old key of a roll, which keeps working until then so deployments can switch.
ALTER TABLE api_keys ADD COLUMN name text;
ALTER TABLE api_keys ADD COLUMN created_by text REFERENCES console_users (id);
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
