import { randomBytes } from 'node:crypto';
import { createLogger, freePort, type Logger } from '@mcp-meter/contracts/kit';
import { MemorySnapshotStore } from '@mcp-meter/contracts/snapshots';
import type { UsageReader, UsageSettlement } from '@mcp-meter/contracts/usage';
import { InProcessUsageBus } from '@mcp-meter/ingest';
import { inject } from 'vitest';
import type { Clock } from '../../control-plane/src/clock';
import type { WebhookConfig } from '../../control-plane/src/config';
import { migratePostgres } from '../../control-plane/src/db/migrate';
import { createPool, type Pool } from '../../control-plane/src/db/pool';
import {
  buildControlPlane,
  type ControlPlane,
  DEFAULT_WEBHOOK_CONFIG,
} from '../../control-plane/src/service';
import { openTestUsageStore } from './usage-store';

/** Fixed so tests can seal and derive tokens the same way. */
export const TEST_SECRET_KEY = Buffer.alloc(32, 7);

export interface TestControlPlane {
  controlPlane: ControlPlane;
  pool: Pool;
  /** This harness's own database (other processes of a test connect to it). */
  databaseUrl: string;
  store: Awaited<ReturnType<typeof openTestUsageStore>>;
  bus: InProcessUsageBus;
  snapshots: MemorySnapshotStore;
  /**
   * Another control plane on the same database, reading usage through `reader` (fault tests);
   * `settlement` stands in for the usage bus's watermark (default: this harness's bus).
   */
  build(reader: UsageReader, settlement?: UsageSettlement): Promise<ControlPlane>;
  /** Waits until every accepted record is in ClickHouse. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The control plane as `npm start` wires it, on the run's real PostgreSQL and a fresh chdb,
 * with the in-process bus writing into it; tests drive it through `app.inject`.
 */
export async function startTestControlPlane(options: {
  bodyLimitBytes: number;
  clock?: Clock;
  publicUrl?: string;
  webhooks?: Partial<WebhookConfig>;
  /** Defaults to loopback, where test origins listen. */
  outboundAllowedHosts?: string[];
  /** Where sign-in codes are mailed (a test mailbox); unset, they are logged. */
  smtpUrl?: string;
  /** MAIL_TO_LOG: without smtpUrl, mail is written to the log (default off, as with DATABASE_URL). */
  mailToLog?: boolean;
  /** A CA to trust for client metadata documents served by the test over https. */
  outboundCa?: string;
  /** Defaults to a silent one. */
  logger?: Logger;
  /** The platform's fee on payments (default none). */
  platformFee?: { bps: number; fixed: number };
  /** Default manual: clock-walking tests would otherwise see their balances paid out. */
  payouts?: { schedule: 'daily' | 'weekly' | 'manual'; delayDays: number };
  /** STRIPE_API_URL: stripe-mock (test/helpers/stripe-mock.ts) for live payments. */
  stripeApiUrl?: string;
  /** The PostgreSQL server to make its database on (default the run's; fault tests bring their own). */
  postgresServerUrl?: string;
  /** CONSOLE_SIGNUP (default open). */
  consoleSignup?: 'open' | 'closed';
}): Promise<TestControlPlane> {
  const logger = options.logger ?? createLogger({ level: 'silent', name: 'test' });
  // A database of its own on the run's server: the billing scheduler is global by design, so one
  // test file's clock (or the real one) must never renew another file's purchases.
  const serverUrl = options.postgresServerUrl ?? inject('infra').databaseUrl;
  const databaseUrl = await createTestDatabase(serverUrl);
  const pool = createPool(databaseUrl);
  // The payment services' connections, apart as in production (control-plane/src/db/open.ts).
  const paymentsPool = createPool(databaseUrl);
  const journalPool = createPool(databaseUrl, { max: 2, askedByHolders: true });
  // Closing drops the database WITH (FORCE): a connection still closing then gets 57P01 from the
  // server, which the pool emits as an error; that one is expected, any other is reported.
  for (const each of [pool, paymentsPool, journalPool]) {
    each.on('error', (error: Error & { code?: string }) => {
      if (error.code !== '57P01') console.error('idle PostgreSQL client failed', error);
    });
  }
  await migratePostgres(pool);
  const store = await openTestUsageStore('cp');
  const bus = new InProcessUsageBus({ batchSize: 5000, flushIntervalMs: 20, retryDelayMs: 20, logger });
  await bus.start((records) => store.store.insert(records));
  const snapshots = new MemorySnapshotStore();
  const build = (reader: UsageReader, settlement: UsageSettlement = bus) =>
    buildControlPlane({
      config: {
        bodyLimitBytes: options.bodyLimitBytes,
        proxyPublicUrl: 'http://127.0.0.1:9',
        proxyBaseDomain: undefined,
        secretKey: TEST_SECRET_KEY,
        webhooks: { ...DEFAULT_WEBHOOK_CONFIG, ...options.webhooks },
        outboundAllowedHosts: options.outboundAllowedHosts ?? ['127.0.0.1'],
        ...(options.publicUrl === undefined ? {} : { publicUrl: options.publicUrl }),
        ...(options.smtpUrl === undefined ? {} : { smtpUrl: options.smtpUrl }),
        ...(options.mailToLog === undefined ? {} : { mailToLog: options.mailToLog }),
        ...(options.platformFee === undefined ? {} : { platformFee: options.platformFee }),
        payouts: options.payouts ?? { schedule: 'manual', delayDays: 2 },
        ...(options.stripeApiUrl === undefined ? {} : { stripeApiUrl: options.stripeApiUrl }),
        ...(options.consoleSignup === undefined ? {} : { consoleSignup: options.consoleSignup }),
      },
      logger,
      pool,
      paymentsPool,
      journalPool,
      publisher: bus,
      reader,
      analytics: store.analytics,
      settlement,
      snapshots,
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.outboundCa === undefined ? {} : { outboundCa: options.outboundCa }),
    });
  const controlPlane = await build(store.store);
  return {
    controlPlane,
    pool,
    databaseUrl,
    store,
    bus,
    snapshots,
    build,
    async settled() {
      for (let i = 0; i < 200 && bus.pending > 0; i++) await new Promise((r) => setTimeout(r, 10));
      await bus.drain();
    },
    async close() {
      await controlPlane.webhookWorker.stop();
      await controlPlane.app.close();
      await controlPlane.limits.close();
      await controlPlane.webhookSender.close();
      await bus.stop();
      await store.close();
      await Promise.all([pool.end(), paymentsPool.end(), journalPool.end()]);
      await dropTestDatabase(serverUrl, databaseUrl);
    },
  };
}

/** A fresh, empty database on the server of `serverUrl`; answers its URL. */
async function createTestDatabase(serverUrl: string): Promise<string> {
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = createPool(serverUrl);
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

async function dropTestDatabase(serverUrl: string, databaseUrl: string): Promise<void> {
  const name = new URL(databaseUrl).pathname.slice(1);
  if (!/^t_[0-9a-f]{12}$/.test(name)) return;
  const admin = createPool(serverUrl);
  try {
    // The pool's connections may still be closing on the server: wait for them (a plain DROP
    // fails while any is open) rather than kill them, which hands their client a 57P01 error.
    for (let attempt = 0; attempt < 40; attempt++) {
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${name}`);
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== '55006') throw error; // object_in_use
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field in the tests
type Json = Record<string, any>;

/**
 * Calls the in-process API as a provider key (or, with `null`, with no key) and answers the
 * status and the parsed JSON body.
 */
/**
 * The test control plane listening on loopback at a free port, which is also its PUBLIC_URL
 * (checkout and sign-in links point at it): for browsers, HTTP clients and other processes.
 */
export async function startListeningControlPlane(
  options: Omit<Parameters<typeof startTestControlPlane>[0], 'publicUrl'>,
): Promise<{ harness: TestControlPlane; url: string; port: number }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const harness = await startTestControlPlane({ ...options, publicUrl: url });
  await harness.controlPlane.app.listen({ host: '127.0.0.1', port });
  return { harness, url, port };
}

export function injectClient(controlPlane: ControlPlane, key: string) {
  return async (
    method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
    url: string,
    body?: unknown,
    as: string | null = key,
  ): Promise<{ status: number; body: Json }> => {
    const response = await controlPlane.app.inject({
      method,
      url,
      headers: as === null ? {} : { authorization: `Bearer ${as}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: response.statusCode, body: response.json() as Json };
  };
}
