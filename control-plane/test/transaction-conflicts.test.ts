import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { installErrorHandling } from '../src/http/error-handler';

/**
 * A transaction PostgreSQL aborts because another one held what it needed (a deadlock) is
 * answered 429 `lock_timeout` with Retry-After, never 500: it was rolled back whole, so the
 * request can be made again. The error is a real one, from two transactions on real PostgreSQL
 * locking two rows in opposite orders.
 */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 64 * 1024 });
});
afterAll(() => harness?.close());

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

describe('transactions aborted by a concurrent one', () => {
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
});
