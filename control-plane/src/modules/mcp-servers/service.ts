import type { Environment } from '@mcp-meter/ingest';
import { newId } from '@mcp-meter/ingest/kit';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import type { Pool, Queryable } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import { type McpServerSnapshot, mcpServerKey } from '../../snapshots/format';
import type { SnapshotStore } from '../../snapshots/store';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import { findProduct } from '../products/repository';
import type { AuthContext } from '../providers/service';
import type { McpServer, McpServerCreate } from './schemas';

interface McpServerRow {
  id: string;
  provider_id: string;
  environment: Environment;
  name: string;
  subdomain: string;
  url: string;
  product_id: string | null;
  status: 'active' | 'inactive' | 'suspended';
}

export function slugify(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
}

export interface ProxyAddressing {
  proxyPublicUrl: string;
  proxyBaseDomain: string | undefined;
}

/**
 * Registry of MCP servers behind the proxy. Every change is mirrored into the snapshot store,
 * which is all the proxy reads; `publishAll` rebuilds the store from PostgreSQL (at start, or
 * after Redis lost its data).
 */
export class McpServerService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly snapshots: SnapshotStore,
    private readonly addressing: ProxyAddressing,
  ) {}

  proxyUrl(subdomain: string): string {
    const { proxyPublicUrl, proxyBaseDomain } = this.addressing;
    if (proxyBaseDomain === undefined) return `${proxyPublicUrl}/mcp/${subdomain}`;
    return `${new URL(proxyPublicUrl).protocol}//${subdomain}.${proxyBaseDomain}/mcp`;
  }

  private toApi(row: McpServerRow): Static<typeof McpServer> {
    return {
      id: row.id,
      reference: row.id,
      name: row.name,
      subdomain: row.subdomain,
      url: row.url,
      providerId: row.provider_id,
      mcpProxyUrl: this.proxyUrl(row.subdomain),
      productId: row.product_id,
      status: row.status,
      tools: [],
      hasAuthApiKey: false,
    };
  }

  async create(auth: AuthContext, input: Static<typeof McpServerCreate>) {
    const subdomain = slugify(input.name);
    if (subdomain.length < 2) {
      throw new ValidationError([
        { path: '/name', message: 'must contain at least two letters or digits', location: 'body' },
      ]);
    }
    const origin = new URL(input.url);
    if (origin.protocol !== 'http:' && origin.protocol !== 'https:') {
      throw new ValidationError([
        { path: '/url', message: 'must be an http or https URL', location: 'body' },
      ]);
    }
    let productId: string | null = null;
    if (input.productId !== undefined) {
      const product = await findProduct(this.pool, auth, input.productId);
      if (product === undefined)
        throw new NotFoundError('product_not_found', `No product ${input.productId}`);
      productId = product.id;
    }
    const at = this.clock.now();
    const row: McpServerRow = {
      id: newId('mcp'),
      provider_id: auth.providerId,
      environment: auth.environment,
      name: input.name,
      subdomain,
      url: input.url,
      product_id: productId,
      status: 'active',
    };
    try {
      await this.pool.query(
        `INSERT INTO mcp_servers (id, provider_id, environment, name, subdomain, url, product_id, status, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
        [
          row.id,
          row.provider_id,
          row.environment,
          row.name,
          row.subdomain,
          row.url,
          row.product_id,
          row.status,
          at,
        ],
      );
    } catch (error) {
      if ((error as { code?: string }).code === '23505') {
        throw new ConflictError(
          'subdomain_taken',
          `The subdomain "${subdomain}" is taken; choose another name`,
        );
      }
      throw error;
    }
    await this.publish(row);
    return this.toApi(row);
  }

  async list(auth: AuthContext) {
    const { rows } = await this.pool.query<McpServerRow>(
      'SELECT * FROM mcp_servers WHERE provider_id = $1 AND environment = $2 ORDER BY id',
      [auth.providerId, auth.environment],
    );
    return rows.map((row) => this.toApi(row));
  }

  async get(auth: AuthContext, id: string) {
    const { rows } = await this.pool.query<McpServerRow>(
      'SELECT * FROM mcp_servers WHERE provider_id = $1 AND environment = $2 AND (id = $3 OR subdomain = $3)',
      [auth.providerId, auth.environment, id],
    );
    const row = rows[0];
    if (row === undefined) throw new NotFoundError('mcp_server_not_found', `No MCP server ${id}`);
    return this.toApi(row);
  }

  private async snapshotOf(db: Queryable, row: McpServerRow): Promise<McpServerSnapshot> {
    const meter = await findMeter(db, row.provider_id, row.environment, REQUESTS_METER);
    if (meter === undefined) throw new Error(`provider ${row.provider_id} has no requests meter`);
    return {
      v: 1,
      serverId: row.id,
      providerId: row.provider_id,
      environment: row.environment,
      subdomain: row.subdomain,
      originUrl: row.url,
      status: row.status,
      productId: row.product_id,
      meterRef: meter.id,
      meterName: meter.name,
    };
  }

  private async publish(row: McpServerRow): Promise<void> {
    await this.snapshots.set(
      mcpServerKey(row.subdomain),
      JSON.stringify(await this.snapshotOf(this.pool, row)),
    );
  }

  async publishAll(): Promise<number> {
    const { rows } = await this.pool.query<McpServerRow>('SELECT * FROM mcp_servers');
    for (const row of rows) await this.publish(row);
    return rows.length;
  }
}
