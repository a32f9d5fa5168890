import { createLogger } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { startTcpRelay } from '../../test/helpers/tcp-relay';
import { createPool } from '../src/db/pool';
import { findLimitSubject, listenForSubjectChanges } from '../src/modules/limits/repository';
import { SubjectCache } from '../src/modules/limits/subject-cache';

/**
 * The limit check keeps each subject (customer, product, purchase, governing plan, credits, test
 * clock) in memory and is still never answered from one older than a write committed before the
 * check, whichever control plane (or SQL session) made it (limits/subject-cache.ts, migration 032).
 */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

async function seller(name: string) {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: name });
  const call = injectClient(harness.controlPlane, sandboxKey);
  const product = (await call('POST', '/v1/ui/products', { name: 'Metered', reference: 'metered' })).body;
  const plan = (
    await call('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Free',
      type: 'recurring',
      billingCycle: 'monthly',
      price: 0,
      limit: 10,
      default: true,
    })
  ).body;
  await call('POST', '/v1/sdk/customers', { externalRef: 'subject-user' });
  return { call, key: sandboxKey, product, plan };
}

const subjects = () => harness.controlPlane.limits.subjects;

/** Checks until one is answered from memory: the cache is listening for changes. */
async function untilListening(check: () => Promise<unknown>, cache: SubjectCache = subjects()) {
  for (let i = 0; i < 100; i++) {
    const before = cache.reads;
    await check();
    if (cache.reads === before) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the subject cache never started answering from memory');
}

/**
 * A cache of its own whose listening connection goes through a relay that can stall (a half-dead
 * network path), given up after `timeoutMs` without an answer; `limitOf` reads through it.
 */
async function relayedCache(key: string, timeoutMs: number) {
  const tenant = await harness.controlPlane.providers.authenticate(`Bearer ${key}`);
  const relay = await startTcpRelay(Number(new URL(harness.databaseUrl).port));
  const relayed = new URL(harness.databaseUrl);
  relayed.port = String(relay.port);
  const relayedPool = createPool(relayed.toString());
  const cache = new SubjectCache(
    (heard, lost) => listenForSubjectChanges(relayedPool, timeoutMs, heard, lost),
    createLogger({ level: 'silent', name: 'test' }),
  );
  const limitOf = async (customerRef: string) =>
    (
      await cache.get(tenant, customerRef, 'metered', () =>
        findLimitSubject(harness.pool, tenant, customerRef, 'metered'),
      )
    ).plan?.usage_limit;
  const close = async () => {
    relay.hold(false);
    await cache.close();
    await relayedPool.end();
    await relay.close();
  };
  return { relay, cache, limitOf, close };
}

describe('limit subjects kept in memory', () => {
  it('answers from memory, and sees every write committed before the check, from any writer', async () => {
    const { call, key, product, plan } = await seller('Subjects');
    const check = (client = call) =>
      client('POST', '/v1/sdk/limits', {
        customerRef: 'subject-user',
        productRef: 'metered',
        consume: false,
      });
    await untilListening(check);

    // Without writes, checks read nothing from PostgreSQL.
    const quiet = subjects().reads;
    for (let i = 0; i < 30; i++) expect((await check()).body).toMatchObject({ limit: 10, planId: plan.id });
    expect(subjects().reads).toBe(quiet);

    // Another SQL session changes the limit; the very next check sees it, each time.
    for (let limit = 11; limit <= 40; limit++) {
      await harness.pool.query('UPDATE plans SET usage_limit = $1 WHERE id = $2', [limit, plan.id]);
      expect((await check()).body).toMatchObject({ limit, planId: plan.id });
    }

    // Another control plane on the same database activates a bigger plan; this one sees it at once.
    const other = await harness.build(harness.store.store);
    try {
      const viaOther = injectClient(other, key);
      const bigger = (
        await viaOther('POST', `/v1/ui/products/${product.id}/plans`, {
          name: 'Bigger',
          type: 'recurring',
          billingCycle: 'monthly',
          price: 0,
          limit: 500,
        })
      ).body;
      const activated = (
        await viaOther('POST', '/v1/sdk/activate', { customerRef: 'subject-user', planRef: bigger.id })
      ).body;
      expect(activated).toMatchObject({ status: 'activated' });
      expect((await check()).body).toMatchObject({ limit: 500, planId: bigger.id });
      // And the other way round: its own cache sees this control plane's cancellation.
      await untilListening(() => check(viaOther));
      expect(
        (await call('POST', `/v1/sdk/purchases/${activated.purchaseRef}/cancel`, { atPeriodEnd: false }))
          .status,
      ).toBe(200);
      expect((await check(viaOther)).body).toMatchObject({ limit: 40, planId: plan.id });
    } finally {
      await other.limits.close();
      await other.app.close();
    }

    // Many checks at once with a write among them: those after the write's commit see it.
    const before = check();
    await harness.pool.query('UPDATE plans SET usage_limit = 77 WHERE id = $1', [plan.id]);
    const after = await Promise.all(Array.from({ length: 40 }, () => check()));
    await before;
    for (const answer of after) expect(answer.body).toMatchObject({ limit: 77 });
  });

  it('reads PostgreSQL while it cannot hear changes, then listens again', async () => {
    const { call, plan } = await seller('Unheard');
    const check = () =>
      call('POST', '/v1/sdk/limits', { customerRef: 'subject-user', productRef: 'metered', consume: false });
    await untilListening(check);
    // The listening connection is cut (a PostgreSQL restart, a network fault)...
    const cut = await harness.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE application_name = 'mcp-meter limit subjects' AND datname = current_database()`,
    );
    expect(cut.rowCount).toBeGreaterThan(0);
    // ...and a change made meanwhile is never missed: checks read it from PostgreSQL.
    await harness.pool.query('UPDATE plans SET usage_limit = 25 WHERE id = $1', [plan.id]);
    expect((await check()).body).toMatchObject({ limit: 25 });
    await harness.pool.query('UPDATE plans SET usage_limit = 26 WHERE id = $1', [plan.id]);
    expect((await check()).body).toMatchObject({ limit: 26 });
    // Listening again (within about a second), checks come from memory and still see changes.
    await untilListening(check);
    await harness.pool.query('UPDATE plans SET usage_limit = 27 WHERE id = $1', [plan.id]);
    expect((await check()).body).toMatchObject({ limit: 27 });
  });

  it('gives up a listening connection that goes silent, and reads PostgreSQL meanwhile', async () => {
    const { key, plan } = await seller('Silent');
    const { relay, cache, limitOf, close } = await relayedCache(key, 300);
    const limit = () => limitOf('subject-user');
    try {
      await untilListening(limit, cache);
      relay.hold(true);
      await harness.pool.query('UPDATE plans SET usage_limit = 31 WHERE id = $1', [plan.id]);
      // The barrier goes unanswered: past its timeout the connection is given up and the check
      // reads PostgreSQL (it would wait for ever otherwise).
      expect(await limit()).toBe(31);
      await harness.pool.query('UPDATE plans SET usage_limit = 32 WHERE id = $1', [plan.id]);
      expect(await limit()).toBe(32);
      // The path is back: a new connection listens, and changes are heard again.
      relay.hold(false);
      await untilListening(limit, cache);
      await harness.pool.query('UPDATE plans SET usage_limit = 33 WHERE id = $1', [plan.id]);
      expect(await limit()).toBe(33);
    } finally {
      await close();
    }
  });

  it('reads a subject not in memory without waiting for a barrier', async () => {
    const { call, key } = await seller('Misses');
    await call('POST', '/v1/sdk/customers', { externalRef: 'second-user' });
    const { relay, cache, limitOf, close } = await relayedCache(key, 2_000);
    try {
      await untilListening(() => limitOf('subject-user'), cache);
      // The listening connection stalls: a barrier would go unanswered until it is given up.
      relay.hold(true);
      const reads = cache.reads;
      expect(await limitOf('second-user')).toBe(10);
      expect(cache.reads).toBe(reads + 1);
      relay.hold(false);
      // Kept, and the connection was never given up: answered from memory after a barrier.
      expect(await limitOf('second-user')).toBe(10);
      expect(cache.reads).toBe(reads + 1);
    } finally {
      await close();
    }
  });

  it('drops a subject when the credits funded change, not when usage is debited', async () => {
    const { call, product } = await seller('Credits');
    const credit = (
      await call('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Credits',
        type: 'usage-based',
        billingModel: 'pre-paid',
        creditsPerUnit: 2,
      })
    ).body;
    expect(credit.id).toBeDefined();
    const customer = (await call('POST', '/v1/sdk/customers', { externalRef: 'credit-user' })).body;
    expect(
      (await call('POST', `/v1/sdk/customers/${customer.id}/credits`, { kind: 'grant', amount: 100 })).status,
    ).toBe(201);
    expect(
      (await call('POST', '/v1/sdk/activate', { customerRef: 'credit-user', planRef: credit.id })).body,
    ).toMatchObject({ status: 'activated' });
    const check = () =>
      call('POST', '/v1/sdk/limits', { customerRef: 'credit-user', productRef: 'metered', consume: false });
    await untilListening(check);
    expect((await check()).body).toMatchObject({ creditBalance: 100, creditsPerUnit: 2 });
    expect(
      (await call('POST', `/v1/sdk/customers/${customer.id}/credits`, { kind: 'grant', amount: 50 })).status,
    ).toBe(201);
    expect((await check()).body).toMatchObject({ creditBalance: 150 });
    // A debit moves credits from the balance to usage_debited: what was funded is unchanged.
    const quiet = subjects().reads;
    await harness.pool.query(
      'UPDATE credit_balances SET balance = balance - 4, usage_debited = usage_debited + 4 WHERE customer_id = $1',
      [customer.id],
    );
    expect((await check()).body).toMatchObject({ creditBalance: 150 });
    expect(subjects().reads).toBe(quiet);
  });
});
