/**
 * A published MCP server as the proxy reads it from the snapshot store, for proxy tests that run
 * without a control plane: active, sandbox, on the `requests` meter, with no product (so no
 * gating) unless `fields` say otherwise.
 */
export function serverSnapshot(
  fields: { subdomain: string; providerId: string; originUrl: string } & Record<string, unknown>,
): string {
  return JSON.stringify({
    v: 1,
    serverId: `mcp_${fields.subdomain}`,
    environment: 'sandbox',
    status: 'active',
    productId: null,
    meterRef: 'mtr_requests',
    meterName: 'requests',
    ...fields,
  });
}
