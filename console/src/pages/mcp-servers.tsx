import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link } from '@tanstack/react-router';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { mayIntegrate, useSession } from '../session';
import { Empty, Failed, Field, FormProblem, Loading, Page, Select } from '../ui';

/** How each MCP client is told about a server at `url`, named `name`. */
export function connectionSnippets(name: string, url: string) {
  return [
    { client: 'Claude Code', text: `claude mcp add --transport http ${name} ${url}` },
    {
      client: 'Claude Desktop (claude_desktop_config.json)',
      text: JSON.stringify(
        { mcpServers: { [name]: { command: 'npx', args: ['-y', 'mcp-remote', url] } } },
        null,
        2,
      ),
    },
    {
      client: 'Cursor (~/.cursor/mcp.json)',
      text: JSON.stringify({ mcpServers: { [name]: { url } } }, null, 2),
    },
    {
      client: 'VS Code (.vscode/mcp.json)',
      text: JSON.stringify({ servers: { [name]: { type: 'http', url } } }, null, 2),
    },
  ];
}

/** MCP servers behind the proxy: add one; each has its own page (health, tools, connecting). */
export function McpServers() {
  const session = useSession();
  const client = useQueryClient();
  const servers = useQuery({
    queryKey: ['mcp-servers'],
    queryFn: () => unwrap(api.GET('/v1/ui/mcp-servers')),
  });
  const products = useQuery({
    queryKey: ['products'],
    queryFn: () => unwrap(api.GET('/v1/ui/products', { params: { query: { limit: 100 } } })),
  });
  const refresh = () => void client.invalidateQueries({ queryKey: ['mcp-servers'] });
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [productId, setProductId] = useState('');
  const create = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/v1/ui/mcp-servers', { body: { name, url, ...(productId ? { productId } : {}) } })),
    onSuccess: () => {
      setName('');
      setUrl('');
      refresh();
    },
  });
  const canChange = session.data !== undefined && mayIntegrate(session.data.role);
  return (
    <Page title="MCP servers">
      {servers.isPending ? (
        <Loading what="MCP servers" />
      ) : servers.error ? (
        <Failed error={servers.error} retry={() => void servers.refetch()} />
      ) : servers.data.length === 0 ? (
        <Empty>
          <p>No MCP servers yet: add yours to meter and sell its tool calls through the proxy.</p>
        </Empty>
      ) : (
        <ul className="cards">
          {servers.data.map((server) => (
            <li key={server.id} className="card">
              <h2>
                <Link to="/mcp-servers/$serverId" params={{ serverId: server.id }}>
                  {server.name}
                </Link>
              </h2>
              <p className="muted">
                <code>{server.id}</code> · {server.status} · {server.tools.length} tool
                {server.tools.length === 1 ? '' : 's'} · origin <code>{server.url}</code>
              </p>
              <p>
                Clients connect to <code data-testid="proxy-url">{server.mcpProxyUrl}</code>
              </p>
            </li>
          ))}
        </ul>
      )}
      {canChange && (
        <form
          className="card"
          aria-labelledby="new-server"
          onSubmit={(event) => {
            event.preventDefault();
            create.mutate();
          }}
          noValidate
        >
          <h2 id="new-server">New MCP server</h2>
          <Field
            label="Name"
            name="name"
            value={name}
            onChange={setName}
            error={create.error}
            hint="Letters, digits and dashes: it names the proxy URL"
            required
          />
          <Field
            label="Origin URL"
            name="url"
            type="url"
            value={url}
            onChange={setUrl}
            error={create.error}
            hint="Where your MCP server answers (http or https)"
            required
          />
          <Select
            label="Product"
            name="productId"
            value={productId}
            onChange={setProductId}
            options={[
              { value: '', label: 'None (not sold)' },
              ...(products.data?.data ?? []).map((p) => ({ value: p.id, label: p.name })),
            ]}
          />
          <FormProblem error={create.error} fields={['name', 'url', 'productId']} />
          <button type="submit" className="primary" disabled={create.isPending}>
            Add MCP server
          </button>
        </form>
      )}
    </Page>
  );
}
