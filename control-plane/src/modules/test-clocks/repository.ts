import type { Queryable } from '../../db/pool';
import type { Tenant } from '../products/repository';

export interface TestClockRow {
  id: string;
  provider_id: string;
  name: string | null;
  frozen_time: Date;
  advancing_since: Date | null;
  created_at: Date;
}

export async function insertTestClock(
  db: Queryable,
  row: Omit<TestClockRow, 'advancing_since'>,
): Promise<TestClockRow> {
  const { rows } = await db.query<TestClockRow>(
    `INSERT INTO test_clocks (id, provider_id, environment, name, frozen_time, created_at)
     VALUES ($1, $2, 'sandbox', $3, $4, $5) RETURNING *`,
    [row.id, row.provider_id, row.name, row.frozen_time, row.created_at],
  );
  const inserted = rows[0];
  if (inserted === undefined) throw new Error('test clock insert returned no row');
  return inserted;
}

export async function findTestClock(
  db: Queryable,
  tenant: Tenant,
  id: string,
): Promise<TestClockRow | undefined> {
  if (tenant.environment !== 'sandbox') return undefined;
  const { rows } = await db.query<TestClockRow>(
    'SELECT * FROM test_clocks WHERE provider_id = $1 AND id = $2',
    [tenant.providerId, id],
  );
  return rows[0];
}

export async function listTestClocks(db: Queryable, providerId: string): Promise<TestClockRow[]> {
  const { rows } = await db.query<TestClockRow>(
    'SELECT * FROM test_clocks WHERE provider_id = $1 ORDER BY id DESC LIMIT 100',
    [providerId],
  );
  return rows;
}

/**
 * Marks the clock as advancing, unless an advance already runs (one that started before
 * `staleBefore` is taken over: its process is gone). Undefined when another advance holds it.
 */
export async function claimAdvance(
  db: Queryable,
  id: string,
  at: Date,
  staleBefore: Date,
): Promise<TestClockRow | undefined> {
  const { rows } = await db.query<TestClockRow>(
    `UPDATE test_clocks SET advancing_since = $2
      WHERE id = $1 AND (advancing_since IS NULL OR advancing_since < $3) RETURNING *`,
    [id, at, staleBefore],
  );
  return rows[0];
}

/** Moves the clock's frozen time (each step of an advance), ending the advance when `done`. */
export async function setFrozenTime(
  db: Queryable,
  id: string,
  time: Date,
  done: boolean,
): Promise<TestClockRow> {
  const { rows } = await db.query<TestClockRow>(
    `UPDATE test_clocks SET frozen_time = $2, advancing_since = CASE WHEN $3 THEN NULL ELSE advancing_since END
      WHERE id = $1 RETURNING *`,
    [id, time, done],
  );
  const row = rows[0];
  if (row === undefined) throw new Error(`test clock ${id} vanished`);
  return row;
}

export async function releaseAdvance(db: Queryable, id: string): Promise<void> {
  await db.query('UPDATE test_clocks SET advancing_since = NULL WHERE id = $1', [id]);
}

/**
 * The frozen time of the test clock a request is about, found from the customer it names (id or
 * externalRef), a purchase or an invoice of that customer, or the clock given to a new customer.
 */
export async function testTimeOf(
  db: Queryable,
  tenant: Tenant,
  about: {
    customerRef?: string | undefined;
    purchaseRef?: string | undefined;
    invoiceId?: string | undefined;
    testClock?: string | undefined;
  },
): Promise<Date | undefined> {
  const { rows } = await db.query<{ frozen_time: Date }>({
    name: 'test_clock_time',
    text: `SELECT t.frozen_time FROM test_clocks t
      WHERE t.provider_id = $1
        AND (t.id = $3
             OR t.id IN (SELECT test_clock_id FROM customers
                          WHERE provider_id = $1 AND environment = 'sandbox' AND (id = $2 OR external_ref = $2))
             OR t.id IN (SELECT c.test_clock_id FROM purchases p JOIN customers c ON c.id = p.customer_id
                          WHERE p.id = $4 AND c.provider_id = $1)
             OR t.id IN (SELECT c.test_clock_id FROM invoices i JOIN customers c ON c.id = i.customer_id
                          WHERE i.id = $5 AND c.provider_id = $1))
      LIMIT 1`,
    values: [
      tenant.providerId,
      about.customerRef ?? null,
      about.testClock ?? null,
      about.purchaseRef ?? null,
      about.invoiceId ?? null,
    ],
  });
  return rows[0]?.frozen_time;
}
