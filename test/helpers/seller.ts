import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { expect } from 'vitest';
import { apiClient } from './api';
import { type ProviderKeys, suffix } from './flows';
import { explainTimeouts } from './poll';
import { runAdmin, type Service, type StackName, sharedStackEnv, spawnSplitStack } from './processes';

/**
 * The set-up the end-to-end files share: a split stack (control plane with ingest, one proxy)
 * on the shared infra in a directory of its own, and a seller on it (a provider, one product,
 * its plans, and MCP servers in front of origins).
 */

export interface SplitStack {
  dir: string;
  env: NodeJS.ProcessEnv;
  /** The control plane's API. */
  baseUrl: string;
  proxyPort: number;
  proxyUrl: string;
  services: Service[];
  /** Settles once every service answers its health check. */
  ready: Promise<void>;
  /**
   * The last `lines` lines of each service's log (warnings and errors at the tests' log level):
   * what every timed-out `pollUntil` adds to its message while the stack runs.
   */
  logTail(lines?: number): string;
  /** Stops the services and removes the directory. */
  stop(): Promise<void>;
}

/** Starts a split stack; its proxy takes `proxy` on top of its defaults (its port, a spill directory). */
export async function startSplitStack(options: {
  name: StackName;
  infra: Parameters<typeof sharedStackEnv>[0]['infra'];
  /** SECRET_KEY: the stack's paywall states and origin keys are sealed with it. */
  secretKey: string;
  /** Give the control plane its own URL as PUBLIC_URL (checkout and sign-in links). */
  publicUrl?: boolean;
  logLevel?: string;
  /** More of the control plane's settings, given the stack's URLs (mail, the proxy's public URL). */
  extra?: (urls: { baseUrl: string; proxyUrl: string }) => NodeJS.ProcessEnv;
  proxy?: NodeJS.ProcessEnv;
}): Promise<SplitStack> {
  const dir = mkdtempSync(join(tmpdir(), `mcpmeter-${options.name}-`));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const proxyPort = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const proxyUrl = `http://127.0.0.1:${proxyPort}`;
  const env = sharedStackEnv({
    name: options.name,
    infra: options.infra,
    dir,
    port,
    ...(options.logLevel === undefined ? {} : { logLevel: options.logLevel }),
    extra: {
      SECRET_KEY: options.secretKey,
      ...(options.publicUrl === true ? { PUBLIC_URL: baseUrl } : {}),
      ...options.extra?.({ baseUrl, proxyUrl }),
    },
  });
  const stack = spawnSplitStack({
    env,
    logDir: dir,
    proxies: [{ PROXY_PORT: String(proxyPort), PROXY_SPILL_DIR: join(dir, 'spill'), ...options.proxy }],
  });
  const logTail = (lines = 20) =>
    stack.services
      .map((s) => {
        const text = existsSync(s.logFile) ? readFileSync(s.logFile, 'utf8').trimEnd() : '';
        const tail = text === '' ? '(empty)' : text.split('\n').slice(-lines).join('\n');
        return `--- ${basename(s.logFile)}, last ${lines} lines:\n${tail.slice(-8_000)}`;
      })
      .join('\n');
  // Every wait of the file that times out while the stack runs ends with its services' logs.
  const forget = explainTimeouts(() => logTail());
  return {
    dir,
    env,
    baseUrl,
    proxyPort,
    proxyUrl,
    services: stack.services,
    ready: stack.ready,
    logTail,
    async stop() {
      forget();
      await Promise.all(stack.services.map((s) => s.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A plan as the seller asks for it: recurring, monthly, in dollars unless it says otherwise. */
export type PlanBody = Record<string, unknown> & { name: string };

/** Any client of the control plane's API: over HTTP (`apiClient`) or in process (`injectClient`). */
export type SellerApi = (
  method: 'POST',
  path: string,
  body: unknown,
) => Promise<{ status: number; body: unknown }>;

/** One product on sale: its plans' ids by name, and MCP servers registered in front of origins. */
export interface Catalog {
  productId: string;
  /** The plans' ids, by name. */
  plans: Record<string, string>;
  /** Registers an MCP server in front of `url`, its default plan the one named (or none). */
  register(
    url: string,
    options?: { defaultPlan?: string; name?: string; extra?: Record<string, unknown> },
  ): Promise<{ subdomain: string; mcpProxyUrl: string }>;
}

export interface Seller extends Catalog {
  provider: ProviderKeys;
  /** The provider's API in the seller's mode (sandbox unless asked for live). */
  api: ReturnType<typeof apiClient>;
}

/**
 * A provider selling one product with `plans`: a new provider created with the admin CLI when
 * given a name, or another product of one already made. Sandbox unless `mode` says live.
 */
export async function startSeller(
  stack: Pick<SplitStack, 'env' | 'baseUrl'>,
  options: { provider: string | ProviderKeys; product: string; plans: PlanBody[]; mode?: 'sandbox' | 'live' },
): Promise<Seller> {
  const provider =
    typeof options.provider === 'string'
      ? await runAdmin<ProviderKeys>(['provider', 'create', '--name', options.provider], stack.env)
      : options.provider;
  const api = apiClient(stack.baseUrl, options.mode === 'live' ? provider.liveKey : provider.sandboxKey);
  return { provider, api, ...(await sell(api, options)) };
}

/** Puts one product with `plans` on sale through `api`, a provider's key in one mode. */
export async function sell(
  api: SellerApi,
  options: { product: string; plans: PlanBody[] },
): Promise<Catalog> {
  const created = async (path: string, body: unknown, what: string) => {
    const answer = await api('POST', path, body);
    expect(answer.status, what).toBe(201);
    return answer.body as Record<string, unknown>;
  };
  const productId = (await created('/v1/ui/products', { name: options.product }, 'product')).id as string;
  const plans: Record<string, string> = {};
  for (const body of options.plans) {
    const plan = await created(
      `/v1/ui/products/${productId}/plans`,
      { currency: 'usd', type: 'recurring', billingCycle: 'monthly', ...body },
      `plan ${body.name}`,
    );
    plans[body.name] = plan.id as string;
  }
  return {
    productId,
    plans,
    async register(url, registration = {}) {
      const server = await created(
        '/v1/ui/mcp-servers',
        {
          name: registration.name ?? `server-${suffix()}`,
          url,
          productId,
          ...(registration.defaultPlan === undefined
            ? {}
            : { defaultPlanId: plans[registration.defaultPlan] }),
          ...registration.extra,
        },
        'MCP server',
      );
      return server as { subdomain: string; mcpProxyUrl: string };
    },
  };
}
