import type { Logger } from '@mcp-meter/contracts/kit';
import { ID, newId, type OutboundGuard } from '@mcp-meter/contracts/kit';
import type { SnapshotStore } from '@mcp-meter/contracts/snapshots';
import { type McpServerSnapshot, mcpServerKey, seal, unseal } from '@mcp-meter/contracts/snapshots';
import type { UsageReader } from '@mcp-meter/contracts/usage';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import type { Pool, Queryable } from '../../db/pool';
import { ConflictError, type FieldProblem, NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import { findPlan, settingsOf } from '../plans/repository';
import { requiresPayment } from '../plans/rules';
import { findProduct } from '../products/repository';
import { checkOrigin, listOriginTools } from './origin';
import {
  allServers,
  findServer,
  insertServer,
  listServers,
  type McpServerRow,
  netRevenueByProduct,
  providerCurrency,
  softDeleteServer,
  updateServer,
} from './repository';
import type { McpServer, McpServerCreate, McpServerUpdate, Tool } from './schemas';

interface ServerFigures {
  transactions: Map<string, number> | undefined;
  balances: Map<string, number>;
  currency: string;
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

type ToolInput = NonNullable<Static<typeof McpServerCreate>['tools']>[number];

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
    private readonly reader: UsageReader,
    private readonly secretKey: Buffer,
    private readonly logger: Logger,
    private readonly guard: OutboundGuard,
  ) {}

  /** The origin URL passes the SSRF guard (it is checked again at every connection). */
  private async checkOriginUrl(raw: string): Promise<void> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      // The schema's uri format lets through forms no URL parser takes (http:// alone).
      throw new ValidationError([
        { path: '/url', message: 'must be an absolute http(s) URL', location: 'body' },
      ]);
    }
    const problem = await this.guard.problem(url);
    if (problem !== undefined)
      throw new ValidationError([{ path: '/url', message: problem, location: 'body' }]);
  }

  proxyUrl(subdomain: string): string {
    const { proxyPublicUrl, proxyBaseDomain } = this.addressing;
    if (proxyBaseDomain === undefined) return `${proxyPublicUrl}/mcp/${subdomain}`;
    return `${new URL(proxyPublicUrl).protocol}//${subdomain}.${proxyBaseDomain}/mcp`;
  }

  /**
   * Tool calls per server (ClickHouse, all time) and net collected per product (PostgreSQL, in
   * the provider's default currency). Calls are left out, not guessed, while ClickHouse is down.
   */
  private async figures(auth: AuthContext, rows: McpServerRow[]): Promise<ServerFigures> {
    let transactions: Map<string, number> | undefined;
    const meter = await findMeter(this.pool, auth.providerId, auth.environment, REQUESTS_METER);
    if (meter !== undefined && rows.length > 0) {
      try {
        transactions = await this.reader.countByProperty({
          providerId: auth.providerId,
          environment: auth.environment,
          meterRef: meter.id,
          property: 'server',
          from: new Date(0),
          to: new Date(this.clock.now().getTime() + 86_400_000),
        });
      } catch (error) {
        this.logger.warn({ err: error }, 'usage store unreachable; totalTransactions left out');
      }
    }
    const currency = await providerCurrency(this.pool, auth.providerId);
    const balances = await netRevenueByProduct(
      this.pool,
      auth,
      currency,
      rows.map((r) => r.product_id).filter((id) => id !== null),
    );
    return {
      transactions,
      balances,
      currency,
    };
  }

  private toApi(row: McpServerRow, figures: ServerFigures): Static<typeof McpServer> {
    const transactions = figures.transactions?.get(row.id);
    return {
      id: row.id,
      reference: row.id,
      name: row.name,
      subdomain: row.subdomain,
      url: row.url,
      providerId: row.provider_id,
      mcpProxyUrl: this.proxyUrl(row.subdomain),
      avatarUrl: row.avatar_url,
      productId: row.product_id,
      defaultPlanId: row.default_plan_id,
      status: row.status,
      tools: row.tools,
      authHeaderName: row.auth_api_key_sealed === null ? null : (row.auth_header_name ?? 'Authorization'),
      hasAuthApiKey: row.auth_api_key_sealed !== null,
      allowedOrigins: row.allowed_origins,
      ...(figures.transactions === undefined ? {} : { totalTransactions: transactions ?? 0 }),
      balance: row.product_id === null ? 0 : (figures.balances.get(row.product_id) ?? 0),
      currency: figures.currency,
    };
  }

  /**
   * Resolves the product, and checks that the default plan is a free plan of it and that every
   * tool's plans are plans of it; all problems are reported together.
   */
  private async resolveLinks(
    auth: AuthContext,
    input: { productRef: string | null; defaultPlanId: string | null; tools: ToolInput[] },
  ): Promise<{ productId: string | null; tools: Tool[] }> {
    const problems: FieldProblem[] = [];
    const add = (path: string, message: string) => problems.push({ path, message, location: 'body' });
    let productId: string | null = null;
    if (input.productRef !== null) {
      const product = await findProduct(this.pool, auth, input.productRef);
      if (product === undefined)
        throw new NotFoundError('product_not_found', `No product ${input.productRef}`);
      productId = product.id;
    }
    const planOfProduct = async (planId: string) => {
      const plan = await findPlan(this.pool, auth, planId);
      return plan !== undefined && plan.product_id === productId ? plan : undefined;
    };
    if (input.defaultPlanId !== null) {
      if (productId === null) add('/defaultPlanId', 'needs a linked product (productId)');
      else {
        const plan = await planOfProduct(input.defaultPlanId);
        if (plan === undefined) add('/defaultPlanId', 'must be a plan of the linked product');
        else if (requiresPayment(settingsOf(plan)) || plan.price > 0)
          add('/defaultPlanId', 'must be a free-tier plan (no price, base price or setup fee)');
      }
    }
    const names = new Set<string>();
    const tools: Tool[] = [];
    for (const [index, tool] of input.tools.entries()) {
      if (names.has(tool.name)) add(`/tools/${index}/name`, 'is listed twice');
      names.add(tool.name);
      const planIds = tool.planIds ?? [];
      if (tool.noPlan === true && planIds.length > 0)
        add(`/tools/${index}/planIds`, 'must be empty for a noPlan tool');
      for (const [j, planId] of planIds.entries()) {
        if (productId === null) add(`/tools/${index}/planIds/${j}`, 'needs a linked product (productId)');
        else if ((await planOfProduct(planId)) === undefined)
          add(`/tools/${index}/planIds/${j}`, 'must be a plan of the linked product');
      }
      tools.push({
        name: tool.name,
        planIds,
        noPlan: tool.noPlan ?? false,
        description: tool.description ?? '',
        isVirtual: tool.isVirtual ?? false,
      });
    }
    if (problems.length > 0) throw new ValidationError(problems);
    return { productId, tools };
  }

  async create(auth: AuthContext, input: Static<typeof McpServerCreate>) {
    await this.checkOriginUrl(input.url);
    checkAllowedOrigins(input.allowedOrigins);
    const subdomain = slugify(input.name);
    if (subdomain.length < 2) {
      throw new ValidationError([
        { path: '/name', message: 'must contain at least two letters or digits', location: 'body' },
      ]);
    }
    const links = await this.resolveLinks(auth, {
      productRef: input.productId ?? null,
      defaultPlanId: input.defaultPlanId ?? null,
      tools: input.tools ?? [],
    });
    const at = this.clock.now();
    const row: McpServerRow = {
      id: newId(ID.mcpServer),
      provider_id: auth.providerId,
      environment: auth.environment,
      name: input.name,
      subdomain,
      url: input.url,
      product_id: links.productId,
      status: input.status ?? 'active',
      avatar_url: input.avatarUrl ?? null,
      default_plan_id: input.defaultPlanId ?? null,
      tools: links.tools,
      deleted_at: null,
      auth_header_name: input.authHeaderName ?? null,
      auth_api_key_sealed: input.authApiKey === undefined ? null : seal(this.secretKey, input.authApiKey),
      allowed_origins: input.allowedOrigins ?? [],
    };
    try {
      await insertServer(this.pool, row, at);
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
    return this.toApi(row, await this.figures(auth, [row]));
  }

  private async find(db: Queryable, auth: AuthContext, id: string): Promise<McpServerRow> {
    const row = await findServer(db, auth, id);
    if (row === undefined) throw new NotFoundError('mcp_server_not_found', `No MCP server ${id}`);
    return row;
  }

  async update(auth: AuthContext, id: string, patch: Static<typeof McpServerUpdate>) {
    const current = await this.find(this.pool, auth, id);
    if (patch.url !== undefined) await this.checkOriginUrl(patch.url);
    checkAllowedOrigins(patch.allowedOrigins);
    const productRef = patch.productId === undefined ? current.product_id : patch.productId;
    const defaultPlanId = patch.defaultPlanId === undefined ? current.default_plan_id : patch.defaultPlanId;
    const links = await this.resolveLinks(auth, {
      productRef,
      defaultPlanId,
      tools: patch.tools ?? current.tools,
    });
    const next: McpServerRow = {
      ...current,
      url: patch.url ?? current.url,
      product_id: links.productId,
      default_plan_id: defaultPlanId,
      avatar_url: patch.avatarUrl === undefined ? current.avatar_url : patch.avatarUrl,
      status: patch.status ?? current.status,
      tools: links.tools,
      auth_header_name: patch.authHeaderName === undefined ? current.auth_header_name : patch.authHeaderName,
      auth_api_key_sealed:
        patch.authApiKey === undefined
          ? current.auth_api_key_sealed
          : patch.authApiKey === null
            ? null
            : seal(this.secretKey, patch.authApiKey),
      allowed_origins: patch.allowedOrigins ?? current.allowed_origins,
    };
    await updateServer(this.pool, next, this.clock.now());
    await this.publish(next);
    return this.toApi(next, await this.figures(auth, [next]));
  }

  /** Soft delete: the proxy stops routing to it (after its snapshot cache), and the subdomain is free again. */
  async delete(auth: AuthContext, id: string) {
    const current = await this.find(this.pool, auth, id);
    await softDeleteServer(this.pool, current.id, this.clock.now());
    await this.snapshots.delete(mcpServerKey(current.subdomain));
    return { id: current.id, deleted: true as const };
  }

  async list(auth: AuthContext) {
    const rows = await listServers(this.pool, auth);
    const figures = await this.figures(auth, rows);
    return rows.map((row) => this.toApi(row, figures));
  }

  async get(auth: AuthContext, id: string) {
    const row = await this.find(this.pool, auth, id);
    return this.toApi(row, await this.figures(auth, [row]));
  }

  /** The header the proxy adds on every origin request, or null. */
  originAuth(row: Pick<McpServerRow, 'auth_header_name' | 'auth_api_key_sealed'>) {
    if (row.auth_api_key_sealed === null) return null;
    const header = (row.auth_header_name ?? 'Authorization').toLowerCase();
    const key = unseal(this.secretKey, row.auth_api_key_sealed);
    const value = header === 'authorization' && !key.includes(' ') ? `Bearer ${key}` : key;
    return { header, value };
  }

  /**
   * Reads the origin's `tools/list` (every page) and merges it into the registry: tools keep
   * their plan settings, new tools arrive ungated (they fall to the default plan), descriptions
   * follow the origin, and tools the origin no longer lists are dropped unless marked virtual.
   */
  async importTools(auth: AuthContext, id: string) {
    const current = await this.find(this.pool, auth, id);
    const listed = await listOriginTools(current.url, this.originAuth(current), this.guard);
    const byName = new Map(current.tools.map((t) => [t.name, t]));
    const tools: Tool[] = listed.map((t) => ({
      name: t.name,
      planIds: byName.get(t.name)?.planIds ?? [],
      noPlan: byName.get(t.name)?.noPlan ?? false,
      description: t.description ?? byName.get(t.name)?.description ?? '',
      isVirtual: false,
    }));
    const imported = new Set(tools.map((t) => t.name));
    for (const t of current.tools) if (t.isVirtual && !imported.has(t.name)) tools.push(t);
    return this.update(auth, current.id, { tools });
  }

  /** Looks at the origin now, as a client would (through the SSRF guard, with its API key). */
  async health(auth: AuthContext, id: string) {
    const row = await this.find(this.pool, auth, id);
    const checkedAt = this.clock.now().toISOString();
    return { checkedAt, ...(await checkOrigin(row.url, this.originAuth(row), this.guard)) };
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
      defaultPlanId: row.default_plan_id,
      defaultPlan: await this.defaultPlanTerms(db, row),
      tools: row.tools.map((t) => ({ name: t.name, planIds: t.planIds, noPlan: t.noPlan })),
      allowedOrigins: row.allowed_origins,
      originAuth:
        row.auth_api_key_sealed === null
          ? null
          : (() => {
              const auth = this.originAuth(row);
              return auth === null
                ? null
                : { header: auth.header, sealedValue: seal(this.secretKey, auth.value) };
            })(),
    };
  }

  private async defaultPlanTerms(
    db: Queryable,
    row: McpServerRow,
  ): Promise<McpServerSnapshot['defaultPlan']> {
    if (row.default_plan_id === null) return null;
    const plan = await findPlan(
      db,
      { providerId: row.provider_id, environment: row.environment },
      row.default_plan_id,
    );
    if (plan === undefined || plan.status !== 'active') return null;
    return {
      planId: plan.id,
      limit: plan.usage_limit,
      billingCycle: plan.billing_cycle,
      intervalDays: plan.billing_interval_days,
    };
  }

  private async publish(row: McpServerRow): Promise<void> {
    await this.snapshots.set(
      mcpServerKey(row.subdomain),
      JSON.stringify(await this.snapshotOf(this.pool, row)),
    );
  }

  /** Rebuilds every server's snapshot, and removes those of deleted servers. */
  async publishAll(): Promise<number> {
    const rows = await allServers(this.pool);
    let published = 0;
    for (const row of rows) {
      if (row.deleted_at === null) {
        try {
          await this.publish(row);
          published++;
        } catch (error) {
          // One server's origin key sealed under another SECRET_KEY must not stop the service:
          // its previous snapshot (if any) stays, and the error says what to fix.
          this.logger.error(
            { err: error, server: row.id },
            'MCP server snapshot not published (is SECRET_KEY the one its origin key was stored with?)',
          );
        }
      } else if (!rows.some((r) => r.deleted_at === null && r.subdomain === row.subdomain)) {
        await this.snapshots.delete(mcpServerKey(row.subdomain));
      }
    }
    return published;
  }
}

/**
 * Each allowed origin must be written as browsers send the Origin header: scheme, host and a
 * port other than the default, nothing else (`https://app.example`, `http://localhost:5173`).
 * 400 naming the entry, with the form to use when it only differs in case or a trailing slash.
 */
function checkAllowedOrigins(origins: string[] | undefined): void {
  if (origins === undefined) return;
  const problems: FieldProblem[] = [];
  origins.forEach((value, i) => {
    const path = `/allowedOrigins/${i}`;
    let parsed: URL | undefined;
    try {
      parsed = new URL(value);
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) {
      problems.push({
        path,
        message: 'must be an http or https origin, e.g. https://app.example',
        location: 'body',
      });
    } else if (parsed.origin !== value) {
      problems.push({
        path,
        message: `must be an origin alone, as browsers send it: ${parsed.origin}`,
        location: 'body',
      });
    }
  });
  if (problems.length > 0) throw new ValidationError(problems);
}
