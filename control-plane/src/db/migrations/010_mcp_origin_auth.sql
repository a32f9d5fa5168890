-- The origin's API key, sealed with the deployment secret (AES-256-GCM); never returned by the API.
ALTER TABLE mcp_servers ADD COLUMN auth_header_name text;
ALTER TABLE mcp_servers ADD COLUMN auth_api_key_sealed text;
CREATE INDEX payments_product ON payments (product_id) WHERE status = 'succeeded';
