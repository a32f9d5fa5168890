import Fastify from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { creditsProduct } from '../../test/helpers/credit-plans';
import type { PoolClient } from '../src/db/pool';
import { installErrorHandling } from '../src/http/error-handler';
import { lockBalance } from '../src/modules/credits/repository';
import { CreditService } from '../src/modules/credits/service';
import { findCustomer, lockCustomerRow } from '../src/modules/customers/repository';
import { findPlan } from '../src/modules/plans/repository';
import { findProduct } from '../src/modules/products/repository';
import { lockLivePurchase, lockPurchase } from '../src/modules/purchases/repository';

/**
 * Concurrent transactions on real PostgreSQL. One that PostgreSQL aborts because another held
 * what it needed (a deadlock, made here by two transactions locking two rows in opposite orders)
 * is answered 429 `lock_timeout` with Retry-After, never 500: it was rolled back whole, so the
 * request can be made again. And the lock that serialises one customer's changes does not hold
 * back writes that merely refer to the customer, which is what made such cycles.
 */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 64 * 1024 });
});
afterAll(() => harness?.close());
afterEach(() => vi.restoreAllMocks());

/** Two transactions that each lock one row, then the other's: PostgreSQL aborts one of them. */
async function deadlock(): Promise<unknown> {
  await harness.pool.query('CREATE TABLE lock_probe (id int PRIMARY KEY, n int NOT NULL)');
  await harness.pool.query('INSERT INTO lock_probe VALUES (1, 0), (2, 0)');
  const [a, b] = [await harness.pool.connect(), await harness.pool.connect()];
  try {
    await a.query('BEGIN');
    await b.query('BEGIN');
    await a.query('UPDATE lock_probe SET n = n + 1 WHERE id = 1');
    await b.query('UPDATE lock_probe SET n = n + 1 WHERE id = 2');
    const outcomes = await Promise.allSettled([
      a.query('UPDATE lock_probe SET n = n + 1 WHERE id = 2'),
      b.query('UPDATE lock_probe SET n = n + 1 WHERE id = 1'),
    ]);
    await a.query('ROLLBACK');
    await b.query('ROLLBACK');
    const failed = outcomes.filter((o) => o.status === 'rejected');
    expect(failed).toHaveLength(1);
    return (failed[0] as PromiseRejectedResult).reason;
  } finally {
    a.release();
    b.release();
    await harness.pool.query('DROP TABLE lock_probe');
  }
}

describe('concurrent transactions', () => {
  it('answers 429 lock_timeout with Retry-After, not 500', async () => {
    const error = await deadlock();
    expect((error as { code?: string }).code).toBe('40P01');
    const app = Fastify();
    installErrorHandling(app);
    app.get('/move', async () => {
      throw error;
    });
    const answer = await app.inject({ method: 'GET', url: '/move' });
    await app.close();
    expect(answer.statusCode).toBe(429);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.headers['content-type']).toContain('application/problem+json');
    expect(answer.json()).toMatchObject({ status: 429, code: 'lock_timeout' });
    expect(answer.body).not.toContain('deadlock');
  });

  it("keeps no 429 as an Idempotency-Key's answer: the same request sent again runs", async () => {
    const error = await deadlock();
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Retried' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    await api('POST', '/v1/sdk/customers', { externalRef: 'retried' });
    const grant = (key: string) =>
      harness.controlPlane.app.inject({
        method: 'POST',
        url: '/v1/sdk/customers/retried/credits',
        headers: { authorization: `Bearer ${sandboxKey}`, 'idempotency-key': key },
        payload: { kind: 'grant', amount: 5 },
      });
    // PostgreSQL aborts the first attempt for a concurrent transaction: rolled back whole.
    vi.spyOn(CreditService.prototype, 'moveIn').mockRejectedValueOnce(error);
    const aborted = await grant('grant-5');
    expect(aborted.statusCode).toBe(429);
    expect(aborted.json()).toMatchObject({ code: 'lock_timeout' });
    expect((await api('GET', '/v1/sdk/customers/retried/balance')).body.credits).toBe(0);
    // Sent again under its key, as the answer says: it runs, once, and that answer is kept.
    const retried = await grant('grant-5');
    expect(retried.statusCode).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    const replayed = await grant('grant-5');
    expect(replayed.statusCode).toBe(201);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect((await api('GET', '/v1/sdk/customers/retried/balance')).body.credits).toBe(5);
  });

  it('a row locked for a change does not hold back rows written about it', async () => {
    // A customer's, purchase's, plan's or product's lock serialises changes to it; a row that
    // refers to it only checks that it exists (PostgreSQL's foreign-key check takes FOR KEY
    // SHARE on it). Were the one to wait for the other, a transaction holding, say, a balance
    // and writing about the customer could wait for the holder of the customer, waiting in turn
    // for that balance: the deadlock a usage debit and a grant made.
    const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Locks' });
    const auth = { providerId: provider.id, environment: 'sandbox' as const };
    const api = injectClient(harness.controlPlane, sandboxKey);
    const { product, plan } = await creditsProduct(api);
    const customerId = (await api('POST', '/v1/sdk/customers', { externalRef: 'lock' })).body.id as string;
    await api('POST', '/v1/sdk/customers/lock/credits', { kind: 'grant', amount: 5 });
    const activated = await api('POST', '/v1/sdk/activate', { customerRef: customerId, planRef: plan });
    const purchaseId = activated.body.purchaseRef as string;
    expect(purchaseId).toMatch(/^pur_/);
    const locks: Array<[string, string, (tx: PoolClient) => Promise<unknown>]> = [
      ['customers', customerId, (tx) => lockCustomerRow(tx, customerId).then(() => true)],
      ['customers', customerId, (tx) => findCustomer(tx, auth, customerId, { forUpdate: true })],
      ['purchases', purchaseId, (tx) => lockPurchase(tx, purchaseId)],
      ['purchases', purchaseId, (tx) => lockLivePurchase(tx, customerId, product)],
      ['plans', plan, (tx) => findPlan(tx, auth, plan, { forUpdate: true })],
      ['products', product, (tx) => findProduct(tx, auth, product, { forUpdate: true })],
    ];
    for (const [table, id, lock] of locks) {
      const [holder, writer, rival] = [
        await harness.pool.connect(),
        await harness.pool.connect(),
        await harness.pool.connect(),
      ];
      try {
        await holder.query('BEGIN');
        expect(await lock(holder)).not.toBeUndefined();
        // Blocked, the writer would fail here rather than hang: its wait is bounded.
        await writer.query('BEGIN');
        await writer.query("SET LOCAL lock_timeout = '10s'");
        const referred = await writer.query(`SELECT 1 FROM ${table} WHERE id = $1 FOR KEY SHARE`, [id]);
        expect(referred.rowCount).toBe(1);
        await writer.query('ROLLBACK');
        // The lock still excludes a second holder.
        await rival.query('BEGIN');
        await rival.query("SET LOCAL lock_timeout = '100ms'");
        await expect(lock(rival)).rejects.toMatchObject({ code: '55P03' });
        await rival.query('ROLLBACK');
        await holder.query('COMMIT');
      } finally {
        for (const client of [holder, writer, rival]) {
          // A failed assertion leaves its transaction open: never hand one back to the pool.
          await client.query('ROLLBACK').catch(() => undefined);
          client.release();
        }
      }
    }
  });

  it('creates a balance for a customer whose lock another transaction holds', async () => {
    // The foreign-key check itself, on a row written for real: the customer's first balance.
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Balance' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    const customerId = (await api('POST', '/v1/sdk/customers', { externalRef: 'new' })).body.id as string;
    const [holder, writer] = [await harness.pool.connect(), await harness.pool.connect()];
    try {
      await holder.query('BEGIN');
      await lockCustomerRow(holder, customerId);
      await writer.query('BEGIN');
      await writer.query("SET LOCAL lock_timeout = '10s'");
      expect(await lockBalance(writer, customerId, new Date())).toBe(0);
      await writer.query('COMMIT');
      await holder.query('COMMIT');
    } finally {
      for (const client of [holder, writer]) {
        await client.query('ROLLBACK').catch(() => undefined);
        client.release();
      }
    }
    expect((await api('GET', '/v1/sdk/customers/new/balance')).body.credits).toBe(0);
  });
});
