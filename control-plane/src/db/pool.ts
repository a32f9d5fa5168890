import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
export type Queryable = Pick<pg.Pool, 'query'>;

// bigint (int8) columns hold money in minor units and counters; all fit in a JS safe integer by
// validation, so they are parsed as numbers rather than strings.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => {
  const parsed = Number(value);
  if (!Number.isSafeInteger(parsed)) throw new Error(`int8 value ${value} exceeds the safe integer range`);
  return parsed;
});

/**
 * Work that holds a pooled connection (a transaction, an advisory lock) must not ask the pool for
 * another: with every connection held by such work, each waits for the next one until the
 * connect timeout and the requests answer 503. With MCPMETER_STRICT_POOL=1 (set for every test
 * run) the pool refuses that second ask at once, so a test that reaches it fails on the spot.
 * Off by default: tracking the holder costs every promise in the process a hook.
 */
const holder = process.env.MCPMETER_STRICT_POOL === '1' ? new AsyncLocalStorage<true>() : undefined;
const holding = <T>(work: () => Promise<T>): Promise<T> =>
  holder === undefined ? work() : holder.run(true, work);

/**
 * `askedByHolders`: a pool that work holding another pooled connection may use (the charge
 * journal's, payments/journal.ts): exempt from MCPMETER_STRICT_POOL, so each statement run on it
 * must never wait on a transaction that could be waiting for it.
 */
export function createPool(
  connectionString: string,
  options: { max?: number; askedByHolders?: boolean } = {},
): Pool {
  // A connect that cannot finish (PostgreSQL down or hung) fails after 5 s: the request gets a 503.
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 5_000,
  });
  // A connection that breaks while checked out between two queries (PostgreSQL stopped during a
  // transaction) emits 'error' on its client, which with no listener ends the process. Its next
  // query fails instead (503 dependency_unavailable), and the pool drops it on release. Idle
  // connections' errors reach the pool's own 'error' event.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
  if (holder !== undefined && options.askedByHolders !== true) {
    const connect = pool.connect.bind(pool) as (...args: unknown[]) => unknown;
    (pool as { connect: unknown }).connect = (...args: unknown[]) => {
      if (holder.getStore() === true)
        throw new Error('MCPMETER_STRICT_POOL: work holding a pooled connection asked the pool for another');
      return connect(...args);
    };
  }
  return pool;
}

/**
 * A named prepared statement: PostgreSQL parses and plans it once per connection instead of on
 * every call. For the hot reads (API key check, limit check) whose text never varies; `name` must
 * be unique to `text` across the codebase.
 */
export function prepared(name: string, text: string, values: unknown[]): pg.QueryConfig {
  return { name, text, values };
}

/** Runs `work` in one transaction: everything it writes commits together or not at all. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await holding(() => transactionOn(client, work));
  } finally {
    client.release();
  }
}

/**
 * `inTransaction` on a connection the caller already holds (one holding a session-level advisory
 * lock): work done under the lock never waits for a second connection from the pool, which
 * other holders waiting for the same lock could have taken, all of them waiting for each other.
 */
export async function transactionOn<T>(
  client: PoolClient,
  work: (client: PoolClient) => Promise<T>,
): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * Runs `work` on one connection while it holds a session-level advisory lock: processes that
 * name the same lock (a number, or a name hashed by PostgreSQL's hashtext) run it one at a time.
 * The lock is released, and the connection returned, however `work` ends.
 */
export async function withAdvisoryLock<T>(
  pool: Pool,
  lock: number | string,
  work: (client: PoolClient) => Promise<T>,
): Promise<T> {
  const key = typeof lock === 'number' ? ['$1::bigint', lock] : ['hashtext($1)', lock];
  const client = await pool.connect();
  try {
    await client.query(`SELECT pg_advisory_lock(${key[0]})`, [key[1]]);
    return await holding(() => work(client));
  } finally {
    await client.query(`SELECT pg_advisory_unlock(${key[0]})`, [key[1]]).catch(() => undefined);
    client.release();
  }
}

/** Answers once PostgreSQL runs a trivial query: the health check. */
export async function pingDatabase(db: Queryable): Promise<void> {
  await db.query('SELECT 1');
}
