import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Address, StoredTaxId } from '../../billing-details';
import { prepared, type Queryable } from '../../db/pool';
import type { Tenant } from '../products/repository';

export interface CustomerRow {
  id: string;
  provider_id: string;
  environment: Environment;
  external_ref: string | null;
  name: string | null;
  email: string | null;
  telephone: string | null;
  status: 'active' | 'inactive' | 'deleted';
  metadata: Record<string, string>;
  /** The billing address invoices are addressed to. */
  address: Address | null;
  /** Tax ids an invoice names the customer by (VAT, EIN, …), with the processor's verification. */
  tax_ids: StoredTaxId[];
  /** The sandbox test clock the customer lives on (its time is the clock's frozen time). */
  test_clock_id: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS =
  'id, provider_id, environment, external_ref, name, email, telephone, status, metadata, address, tax_ids, test_clock_id, created_at, updated_at';

/** Inserts unless a live customer already holds the externalRef; undefined then (no error, no wait). */
export async function insertCustomer(db: Queryable, row: CustomerRow): Promise<CustomerRow | undefined> {
  const { rows } = await db.query<CustomerRow>(
    `INSERT INTO customers (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
     ON CONFLICT (provider_id, environment, external_ref) WHERE external_ref IS NOT NULL AND status <> 'deleted' DO NOTHING
     RETURNING ${COLUMNS}`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.external_ref,
      row.name,
      row.email,
      row.telephone,
      row.status,
      row.metadata,
      row.address === null ? null : JSON.stringify(row.address),
      JSON.stringify(row.tax_ids),
      row.test_clock_id,
      row.created_at,
      row.updated_at,
    ],
  );
  return rows[0];
}

/**
 * The customer's row locked for the caller's transaction (a deleted customer's too), and its
 * status as of the lock (undefined for no such row): what serialises one customer's purchase
 * changes, card changes and balance movements, taken before any other row of theirs. A caller
 * that found the customer before taking the lock reads the status here to see a deletion
 * committed in between. FOR NO KEY UPDATE excludes every other holder of this lock (and
 * `findCustomer`'s) but not the key-share lock a row referring to the customer takes as it is
 * written: with FOR UPDATE, a transaction holding, say, a balance and writing a ledger
 * movement waited for the holder of the customer, who could be waiting for that balance.
 */
export async function lockCustomerRow(
  db: Queryable,
  customerId: string,
): Promise<CustomerRow['status'] | undefined> {
  const { rows } = await db.query<Pick<CustomerRow, 'status'>>(
    'SELECT status FROM customers WHERE id = $1 FOR NO KEY UPDATE',
    [customerId],
  );
  return rows[0]?.status;
}

/**
 * `ref` is the customer id or its externalRef; deleted customers are never found. `forUpdate`
 * locks the row as `lockCustomerRow` does.
 */
export async function findCustomer(
  db: Queryable,
  tenant: Tenant,
  ref: string,
  options: { forUpdate?: boolean } = {},
): Promise<CustomerRow | undefined> {
  const forUpdate = options.forUpdate === true;
  const text = `SELECT ${COLUMNS} FROM customers
      WHERE provider_id = $1 AND environment = $2 AND status <> 'deleted' AND (id = $3 OR external_ref = $3)
      ORDER BY (id = $3) DESC LIMIT 1 ${forUpdate ? 'FOR NO KEY UPDATE' : ''}`;
  const values = [tenant.providerId, tenant.environment, ref];
  const { rows } = await db.query<CustomerRow>(
    forUpdate ? { text, values } : prepared('customer_by_ref', text, values),
  );
  return rows[0];
}

/**
 * The customer id (`cus_…`) each of `refs` names, by id or externalRef, in one query; refs that
 * name no live customer are absent from the map.
 */
export async function resolveCustomerRefs(
  db: Queryable,
  tenant: Tenant,
  refs: readonly string[],
): Promise<Map<string, string>> {
  const unique = [...new Set(refs)];
  const { rows } = await db.query<{ id: string; external_ref: string | null }>(
    `SELECT id, external_ref FROM customers
      WHERE provider_id = $1 AND environment = $2 AND status <> 'deleted'
        AND (id = ANY($3::text[]) OR external_ref = ANY($3::text[]))`,
    [tenant.providerId, tenant.environment, unique],
  );
  const found = new Map<string, string>();
  // An id match wins over an externalRef match, as in findCustomer.
  for (const row of rows)
    if (row.external_ref !== null && unique.includes(row.external_ref)) found.set(row.external_ref, row.id);
  for (const row of rows) if (unique.includes(row.id)) found.set(row.id, row.id);
  return found;
}

export async function listCustomers(
  db: Queryable,
  tenant: Tenant,
  options: {
    after?: string | undefined;
    limit: number;
    externalRef?: string | undefined;
    email?: string | undefined;
  },
): Promise<CustomerRow[]> {
  const { rows } = await db.query<CustomerRow>(
    `SELECT ${COLUMNS} FROM customers
      WHERE provider_id = $1 AND environment = $2 AND status <> 'deleted'
        AND ($3::text IS NULL OR id > $3) AND ($4::text IS NULL OR external_ref = $4)
        AND ($5::text IS NULL OR lower(email) = lower($5))
      ORDER BY id LIMIT $6`,
    [
      tenant.providerId,
      tenant.environment,
      options.after ?? null,
      options.externalRef ?? null,
      options.email ?? null,
      options.limit + 1,
    ],
  );
  return rows;
}

export async function updateCustomer(db: Queryable, row: CustomerRow): Promise<CustomerRow> {
  const { rows } = await db.query<CustomerRow>(
    `UPDATE customers SET external_ref = $2, name = $3, email = $4, telephone = $5, status = $6, metadata = $7, updated_at = $8,
            address = $9, tax_ids = $10
      WHERE id = $1 RETURNING ${COLUMNS}`,
    [
      row.id,
      row.external_ref,
      row.name,
      row.email,
      row.telephone,
      row.status,
      row.metadata,
      row.updated_at,
      row.address === null ? null : JSON.stringify(row.address),
      JSON.stringify(row.tax_ids),
    ],
  );
  const updated = rows[0];
  if (updated === undefined) throw new Error('customer update returned no row');
  return updated;
}
