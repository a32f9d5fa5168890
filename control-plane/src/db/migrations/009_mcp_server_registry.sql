ALTER TABLE mcp_servers ADD COLUMN avatar_url text;
ALTER TABLE mcp_servers ADD COLUMN default_plan_id text REFERENCES plans (id);
ALTER TABLE mcp_servers ADD COLUMN tools jsonb NOT NULL DEFAULT '[]';
ALTER TABLE mcp_servers ADD COLUMN deleted_at timestamptz;
-- A deleted server gives its subdomain back.
ALTER TABLE mcp_servers DROP CONSTRAINT mcp_servers_subdomain_key;
CREATE UNIQUE INDEX mcp_servers_subdomain ON mcp_servers (subdomain) WHERE deleted_at IS NULL;
