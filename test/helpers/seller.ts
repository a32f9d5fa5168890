import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { expect } from 'vitest';
import { apiClient } from './api';
import { type ProviderKeys, suffix } from './flows';
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
  proxy?: NodeJS.ProcessEnv;
}): Promise<SplitStack> {
  const dir = mkdtempSync(join(tmpdir(), `mcpmeter-${options.name}-`));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const proxyPort = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const env = sharedStackEnv({
    name: options.name,
    infra: options.infra,
    dir,
    port,
    ...(options.logLevel === undefined ? {} : { logLevel: options.logLevel }),
    extra: { SECRET_KEY: options.secretKey, ...(options.publicUrl === true ? { PUBLIC_URL: baseUrl } : {}) },
  });
  const stack = spawnSplitStack({
    env,
    logDir: dir,
    proxies: [{ PROXY_PORT: String(proxyPort), PROXY_SPILL_DIR: join(dir, 'spill'), ...options.proxy }],
  });
  return {
    dir,
    env,
    baseUrl,
    proxyPort,
    proxyUrl: `http://127.0.0.1:${proxyPort}`,
    services: stack.services,
    ready: stack.ready,
    async stop() {
      await Promise.all(stack.services.map((s) => s.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A plan as the seller asks for it: recurring, monthly, in dollars unless it says otherwise. */
export type PlanBody = Record<string, unknown> & { name: string };

export interface Seller {
  provider: ProviderKeys;
  /** The provider's sandbox API. */
  api: ReturnType<typeof apiClient>;
  productId: string;
  /** The plans' ids, by name. */
  plans: Record<string, string>;
  /** Registers an MCP server in front of `url`, its default plan the one named (or none). */
  register(
    url: string,
    options?: { defaultPlan?: string; name?: string; extra?: Record<string, unknown> },
  ): Promise<{ subdomain: string; mcpProxyUrl: string }>;
}

/** A provider created with the admin CLI, selling one product with `plans`. */
export async function startSeller(
  stack: Pick<SplitStack, 'env' | 'baseUrl'>,
  options: { provider: string; product: string; plans: PlanBody[] },
): Promise<Seller> {
  const provider = await runAdmin<ProviderKeys>(
    ['provider', 'create', '--name', options.provider],
    stack.env,
  );
  const api = apiClient(stack.baseUrl, provider.sandboxKey);
  const product = await api<{ id: string }>('POST', '/v1/ui/products', { name: options.product });
  expect(product.status).toBe(201);
  const plans: Record<string, string> = {};
  for (const body of options.plans) {
    const plan = await api<{ id: string }>('POST', `/v1/ui/products/${product.body.id}/plans`, {
      currency: 'usd',
      type: 'recurring',
      billingCycle: 'monthly',
      ...body,
    });
    expect(plan.status, `plan ${body.name}`).toBe(201);
    plans[body.name] = plan.body.id;
  }
  return {
    provider,
    api,
    productId: product.body.id,
    plans,
    async register(url, registration = {}) {
      const server = await api<{ subdomain: string; mcpProxyUrl: string }>('POST', '/v1/ui/mcp-servers', {
        name: registration.name ?? `server-${suffix()}`,
        url,
        productId: product.body.id,
        ...(registration.defaultPlan === undefined ? {} : { defaultPlanId: plans[registration.defaultPlan] }),
        ...registration.extra,
      });
      expect(server.status).toBe(201);
      return server.body;
    },
  };
}
