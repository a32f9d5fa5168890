import type { Role } from './repository';

/**
 * What a console member of each role may call on the API (routes as Fastify names them,
 * `/v1/ui/mcp-servers/:id`). Everyone may read. A viewer changes nothing. A developer changes the
 * integration: API keys, webhook endpoints, MCP servers, meters, usage it reports, limit checks, customer
 * tokens and sandbox test clocks; not money, customers or the catalog's prices. Admins and
 * owners change everything, the team included (only owners touch the owner role). API keys are not
 * members: they keep the full access they always had.
 */
const READS = new Set(['GET', 'HEAD']);

const DEVELOPER_WRITES: readonly RegExp[] = [
  /^\/v1\/ui\/api-keys(\/|$)/,
  /^\/v1\/webhook_endpoints(\/|$)/,
  /^\/v1\/ui\/webhooks\//,
  /^\/v1\/ui\/mcp-servers(\/|$)/,
  /^\/v1\/ui\/meters(\/|$)/,
  /^\/v1\/sdk\/meter-events(\/|$)/,
  /^\/v1\/sdk\/usages$/,
  /^\/v1\/sdk\/limits$/,
  /^\/v1\/sdk\/customers\/:ref\/tokens(\/|$)/,
  /^\/v1\/sdk\/test-clocks(\/|$)/,
];

/** Reads for owners and admins alone. */
const ADMIN_READS: readonly RegExp[] = [/^\/v1\/ui\/audit-events$/];

export function mayCall(role: Role, method: string, route: string): boolean {
  if (READS.has(method))
    return role === 'owner' || role === 'admin' || !ADMIN_READS.some((pattern) => pattern.test(route));
  switch (role) {
    case 'owner':
    case 'admin':
      return true;
    case 'developer':
      return DEVELOPER_WRITES.some((pattern) => pattern.test(route));
    case 'viewer':
      return false;
  }
}
