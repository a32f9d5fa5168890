-- The browser origins an MCP server accepts (MCP transports: servers MUST validate Origin).
-- Empty, the default: requests from any web page are refused, requests without Origin served.
ALTER TABLE mcp_servers ADD COLUMN allowed_origins text[] NOT NULL DEFAULT '{}';
