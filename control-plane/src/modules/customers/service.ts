import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Static } from '@sinclair/typebox';
import {
  type AddressInput,
  compactTaxId,
  customerTaxIds,
  keepVerifications,
  normalizeAddress,
  normalizeTaxIds,
  type TaxId,
  type TaxIdVerification,
} from '../../billing-details';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findTestClock } from '../test-clocks/repository';
import { type CustomerRow, findCustomer, insertCustomer, listCustomers, updateCustomer } from './repository';
import type { Customer, CustomerCreate, CustomerEnsure, CustomerUpdate } from './schemas';

/** Work a customer's deletion does in its transaction; returns what to do once it has committed. */
/** What a deletion ends in its transaction; what it returns runs once the deletion has committed. */
export type DeletionHook = (
  tx: PoolClient,
  auth: AuthContext,
  customerId: string,
) => Promise<(() => Promise<void>) | undefined>;

export const toCustomer = (row: CustomerRow): Customer => ({
  reference: row.id,
  id: row.id,
  externalRef: row.external_ref,
  name: row.name,
  email: row.email,
  telephone: row.telephone,
  address: row.address,
  taxIds: customerTaxIds(row.tax_ids),
  status: row.status === 'inactive' ? 'inactive' : 'active',
  metadata: row.metadata,
  testClock: row.test_clock_id,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

/**
 * Payload of customer.updated (spec 6.5, with the billing address and tax ids besides);
 * customer.created adds `product`.
 */
const eventObject = (row: CustomerRow) => ({
  id: row.id,
  reference: row.id,
  name: row.name,
  email: row.email,
  telephone: row.telephone,
  address: row.address,
  taxIds: customerTaxIds(row.tax_ids),
  status: row.status,
  created: unixSeconds(row.created_at),
});

/**
 * The billing address and tax ids given, as stored: an address trimmed with its country
 * checked, tax ids compacted and checked for their kind's form. Anything wrong is one 400
 * naming every part at fault, before anything is written.
 */
function billingDetails(input: { address?: AddressInput | null; taxIds?: TaxId[] }) {
  const problems: Array<{ path: string; message: string }> = [];
  const address =
    input.address === undefined || input.address === null
      ? input.address
      : normalizeAddress(input.address, '/address', problems);
  const taxIds = input.taxIds === undefined ? undefined : normalizeTaxIds(input.taxIds, '/taxIds', problems);
  if (problems.length > 0)
    throw new ValidationError(problems.map((problem) => ({ ...problem, location: 'body' as const })));
  return { address, taxIds };
}

/**
 * Inserts a customer with its `customer.created` event, in the caller's transaction; undefined
 * when the externalRef is taken. `product` is set only for customers created by the hosted
 * sign-in of an MCP server linked to a product (spec 6.5 rule 1), null otherwise.
 */
export async function createCustomerIn(
  tx: PoolClient,
  tenant: AuthContext,
  input: CustomerCreate,
  options: { at: Date; productId: string | null },
): Promise<CustomerRow | undefined> {
  const { at } = options;
  const details = billingDetails(input);
  let testClock: string | null = null;
  if (input.testClock !== undefined) {
    if (tenant.environment !== 'sandbox')
      throw new ValidationError([
        { path: '/testClock', message: 'test clocks exist in sandbox only', location: 'body' },
      ]);
    const clock = await findTestClock(tx, tenant, input.testClock);
    if (clock === undefined)
      throw new NotFoundError('test_clock_not_found', `No test clock ${input.testClock}`);
    testClock = clock.id;
  }
  const row = await insertCustomer(tx, {
    id: newId(ID.customer),
    provider_id: tenant.providerId,
    environment: tenant.environment,
    external_ref: input.externalRef ?? null,
    name: input.name ?? null,
    email: input.email ?? null,
    telephone: input.telephone ?? null,
    status: 'active',
    metadata: input.metadata ?? {},
    address: details.address ?? null,
    tax_ids: details.taxIds ?? [],
    test_clock_id: testClock,
    created_at: at,
    updated_at: at,
  });
  if (row !== undefined) {
    await writeEvent(tx, {
      ...tenant,
      type: 'customer.created',
      object: {
        ...eventObject(row),
        product: options.productId === null ? null : { reference: options.productId },
      },
      at,
    });
  }
  return row;
}

const isUniqueViolation = (error: unknown): boolean => (error as { code?: string }).code === '23505';

export class CustomerService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    /** Revokes a customer's access tokens with its deletion (the token service). */
    private readonly tokens: {
      revokeIn(tx: PoolClient, auth: AuthContext, customerId: string): Promise<() => Promise<void>>;
    },
  ) {}

  /** What a deletion ends besides the customer (see `onDelete`). */
  private deletionHooks: DeletionHook[] = [];

  /**
   * Runs `hook` in every deletion's transaction, after the customer's row is locked; what it
   * returns runs once the deletion has committed (the purchase service ends the customer's
   * purchases with it, and publishes their entitlements after).
   */
  onDelete(hook: DeletionHook): void {
    this.deletionHooks.push(hook);
  }

  /** Told once a change of a customer's email, name or address has committed (see `onDetailsChanged`). */
  private detailHooks: Array<(auth: AuthContext, customerId: string) => Promise<void>> = [];

  /**
   * Runs `hook` after each committed change of a customer's email, name or address, before the change is
   * answered: the payment processor's copy of the customer follows (payments/service.ts). A hook
   * handles its own failures; the change stands either way.
   */
  onDetailsChanged(hook: (auth: AuthContext, customerId: string) => Promise<void>): void {
    this.detailHooks.push(hook);
  }

  private insert(tx: PoolClient, auth: AuthContext, input: CustomerCreate): Promise<CustomerRow | undefined> {
    return createCustomerIn(tx, auth, input, { at: this.clock.now(), productId: null });
  }

  async create(auth: AuthContext, input: CustomerCreate): Promise<Customer> {
    const row = await inTransaction(this.pool, (tx) => this.insert(tx, auth, input));
    if (row === undefined) {
      const existing =
        input.externalRef === undefined ? undefined : await findCustomer(this.pool, auth, input.externalRef);
      throw new ConflictError(
        'customer_exists',
        `A customer with externalRef "${input.externalRef}" exists`,
        {
          customerRef: existing?.id ?? null,
        },
      );
    }
    return toCustomer(row);
  }

  /**
   * Looks up by externalRef and creates only when none exists. Concurrent calls with the same
   * externalRef meet at the unique index: one inserts, the others read its row.
   */
  async ensure(
    auth: AuthContext,
    input: Static<typeof CustomerEnsure>,
  ): Promise<{ customer: Customer; created: boolean }> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const existing = await findCustomer(this.pool, auth, input.externalRef);
      if (existing !== undefined && existing.external_ref === input.externalRef)
        return { customer: toCustomer(existing), created: false };
      const row = await inTransaction(this.pool, (tx) => this.insert(tx, auth, input));
      if (row !== undefined) return { customer: toCustomer(row), created: true };
    }
    throw new ConflictError('conflict', 'The customer changed while being ensured; retry');
  }

  async get(auth: AuthContext, ref: string): Promise<Customer> {
    const row = await findCustomer(this.pool, auth, ref);
    if (row === undefined) throw new NotFoundError('customer_not_found', `No customer ${ref}`);
    return toCustomer(row);
  }

  async list(
    auth: AuthContext,
    query: {
      limit: number;
      cursor?: string | undefined;
      externalRef?: string | undefined;
      email?: string | undefined;
    },
  ) {
    const rows = await listCustomers(this.pool, auth, { ...query, after: decodeCursor(query.cursor) });
    return toPage(rows, query.limit, toCustomer);
  }

  /**
   * Changes a customer. `change` is the patch, or what makes it from the customer as they are
   * under the row's lock (a tax id added to those they hold), so two changes at once both stand.
   */
  async update(
    auth: AuthContext,
    ref: string,
    change: CustomerUpdate | ((current: Customer) => CustomerUpdate),
  ): Promise<Customer> {
    const at = this.clock.now();
    let patch: CustomerUpdate = typeof change === 'function' ? {} : change;
    let detailsChanged = false;
    let updated: CustomerRow;
    try {
      updated = await inTransaction(this.pool, async (tx) => {
        const current = await findCustomer(tx, auth, ref, { forUpdate: true });
        if (current === undefined) throw new NotFoundError('customer_not_found', `No customer ${ref}`);
        if (typeof change === 'function') patch = change(toCustomer(current));
        // Nothing to change (a tax id already gone): nothing written, nothing announced.
        if (Object.keys(patch).length === 0) return current;
        const details = billingDetails(patch);
        const pick = <K extends keyof CustomerUpdate>(key: K, fallback: CustomerRow[keyof CustomerRow]) =>
          patch[key] === undefined ? fallback : patch[key];
        const next: CustomerRow = {
          ...current,
          external_ref: pick('externalRef', current.external_ref) as string | null,
          name: pick('name', current.name) as string | null,
          email: pick('email', current.email) as string | null,
          telephone: pick('telephone', current.telephone) as string | null,
          status: patch.status ?? current.status,
          metadata: patch.metadata ?? current.metadata,
          address: details.address === undefined ? current.address : details.address,
          tax_ids:
            details.taxIds === undefined
              ? current.tax_ids
              : keepVerifications(details.taxIds, current.tax_ids),
          updated_at: at,
        };
        const stored = await updateCustomer(tx, next);
        const before = eventObject(current);
        const after = eventObject(stored);
        const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
        const previous = Object.fromEntries(
          Object.entries(before).filter(([k, v]) => !same(v, after[k as keyof typeof after])),
        );
        await writeEvent(tx, {
          ...auth,
          type: 'customer.updated',
          object: after,
          previousAttributes: previous,
          at,
        });
        detailsChanged =
          stored.email !== current.email ||
          stored.name !== current.name ||
          !same(stored.address, current.address) ||
          !same(stored.tax_ids, current.tax_ids);
        return stored;
      });
    } catch (error) {
      if (isUniqueViolation(error))
        throw new ConflictError(
          'customer_exists',
          `A customer with externalRef "${patch.externalRef}" exists`,
        );
      throw error;
    }
    if (detailsChanged) for (const hook of this.detailHooks) await hook(auth, updated.id);
    return toCustomer(updated);
  }

  /**
   * What the processor's registry check found for one of the customer's tax ids (Stripe's
   * `customer.tax_id.created` and `.updated`), kept on it in the caller's transaction and
   * announced as customer.updated. A report older than the one kept changes nothing (events come
   * in any order); false when the customer does not hold that id (removed since). The processor
   * is not told again: the verification came from it.
   */
  async recordTaxIdVerification(
    tx: PoolClient,
    auth: AuthContext,
    customerId: string,
    taxId: TaxId,
    verification: TaxIdVerification,
  ): Promise<boolean> {
    const current = await findCustomer(tx, auth, customerId, { forUpdate: true });
    const value = compactTaxId(taxId.value);
    const held = current?.tax_ids.find((t) => t.type === taxId.type && t.value === value);
    if (current === undefined || held === undefined) return false;
    const kept = held.verification;
    // Stripe's events are stamped to the second: within one, a registry's answer outranks pending.
    const older =
      kept !== undefined &&
      (kept.updatedAt > verification.updatedAt ||
        (kept.updatedAt === verification.updatedAt &&
          (verification.status === 'pending' || JSON.stringify(kept) === JSON.stringify(verification))));
    if (older) return true;
    const at = this.clock.now();
    const stored = await updateCustomer(tx, {
      ...current,
      tax_ids: current.tax_ids.map((t) => (t === held ? { ...t, verification } : t)),
      updated_at: at,
    });
    await writeEvent(tx, {
      ...auth,
      type: 'customer.updated',
      object: eventObject(stored),
      previousAttributes: { taxIds: eventObject(current).taxIds },
      at,
    });
    return true;
  }

  /**
   * Soft delete: hidden everywhere, externalRef freed, history (ledger, purchases) kept. Its
   * access tokens are revoked with it, its purchases in force end (`onDelete`), and the proxies
   * are told once the deletion has committed.
   */
  async delete(auth: AuthContext, ref: string): Promise<{ reference: string; deleted: true }> {
    const at = this.clock.now();
    let publishRevocation: (() => Promise<void>) | undefined;
    const afterCommit: Array<() => Promise<void>> = [];
    const deleted = await inTransaction(this.pool, async (tx) => {
      const current = await findCustomer(tx, auth, ref, { forUpdate: true });
      if (current === undefined) throw new NotFoundError('customer_not_found', `No customer ${ref}`);
      // What the customer had in force ends first: its events come before customer.deleted.
      afterCommit.length = 0;
      for (const hook of this.deletionHooks) {
        const after = await hook(tx, auth, current.id);
        if (after !== undefined) afterCommit.push(after);
      }
      await updateCustomer(tx, { ...current, status: 'deleted', updated_at: at });
      await writeEvent(tx, {
        ...auth,
        type: 'customer.deleted',
        object: { id: current.id, created: unixSeconds(current.created_at) },
        at,
      });
      publishRevocation = await this.tokens.revokeIn(tx, auth, current.id);
      return { reference: current.id, deleted: true as const };
    });
    await publishRevocation?.();
    for (const announce of afterCommit) await announce();
    return deleted;
  }
}
