import { ID, newId } from '@mcp-meter/ingest/kit';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, ValidationError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import { findCustomer } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findPlan } from '../plans/repository';
import { findProduct } from '../products/repository';
import type { AuthContext } from '../providers/service';
import type { CREDIT_KINDS, CreditMovement, CreditMovementCreate } from './schemas';

type Kind = (typeof CREDIT_KINDS)[number];

interface LedgerRow {
  id: string;
  customer_id: string;
  kind: Kind;
  amount: number;
  balance_after: number;
  reason: string | null;
  product_ref: string | null;
  metadata: Record<string, string>;
  created_at: Date;
}

const EVENT: Record<Kind, string> = {
  top_up: 'customer.credit.topped_up',
  grant: 'customer.credit.granted',
  debit: 'customer.credit.debited',
  adjustment: 'customer.credit.adjusted',
};

const toMovement = (row: LedgerRow): Static<typeof CreditMovement> => ({
  id: row.id,
  customerRef: row.customer_id,
  kind: row.kind,
  amount: row.amount,
  balance: row.balance_after,
  reason: row.reason,
  productRef: row.product_ref,
  metadata: row.metadata,
  createdAt: row.created_at.toISOString(),
});

/**
 * Per-customer credit balances as an append-only ledger. Each movement locks the balance row,
 * writes the ledger entry with the balance after it, and writes its events in the same
 * transaction: `customer.credit.<kind>` always, `low_balance` when the balance drops below the
 * provider's threshold, `exhausted` when it reaches zero, each once per crossing.
 */
export class CreditService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  private async customer(db: Pool | PoolClient, auth: AuthContext, ref: string, forUpdate = false) {
    const customer = await findCustomer(db, auth, ref, { forUpdate });
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${ref}`);
    return customer;
  }

  private async threshold(db: Pool | PoolClient, providerId: string): Promise<number> {
    const { rows } = await db.query<{ low_balance_threshold: number }>(
      'SELECT low_balance_threshold FROM providers WHERE id = $1',
      [providerId],
    );
    return rows[0]?.low_balance_threshold ?? 100;
  }

  async balance(auth: AuthContext, ref: string) {
    const customer = await this.customer(this.pool, auth, ref);
    const { rows } = await this.pool.query<{ balance: number; updated_at: Date }>(
      'SELECT balance, updated_at FROM credit_balances WHERE customer_id = $1',
      [customer.id],
    );
    return {
      customerRef: customer.id,
      credits: rows[0]?.balance ?? 0,
      lowBalanceThreshold: await this.threshold(this.pool, auth.providerId),
      updatedAt: rows[0]?.updated_at.toISOString() ?? null,
    };
  }

  async list(auth: AuthContext, ref: string, query: { limit: number; cursor?: string | undefined }) {
    const customer = await this.customer(this.pool, auth, ref);
    const { rows } = await this.pool.query<LedgerRow>(
      `SELECT * FROM credit_ledger WHERE customer_id = $1 AND ($2::text IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`,
      [customer.id, decodeCursor(query.cursor) ?? null, query.limit + 1],
    );
    return toPage(rows, query.limit, toMovement);
  }

  /** One movement; with an idempotency key, a retry returns the movement already written. */
  async move(
    auth: AuthContext,
    ref: string,
    input: Static<typeof CreditMovementCreate>,
    idempotencyKey: string | null,
  ): Promise<{ movement: Static<typeof CreditMovement>; replayed: boolean }> {
    if (input.kind === 'top_up' && idempotencyKey === null) {
      throw new DomainError(
        'idempotency_key_required',
        'Top-ups need an Idempotency-Key header so a retry cannot credit twice',
      );
    }
    return inTransaction(this.pool, (tx) => this.moveIn(tx, auth, ref, input, idempotencyKey));
  }

  /** `move` inside the caller's transaction (a checkout that charges and credits together). */
  async moveIn(
    tx: PoolClient,
    auth: AuthContext,
    ref: string,
    input: Static<typeof CreditMovementCreate>,
    idempotencyKey: string | null,
  ): Promise<{ movement: Static<typeof CreditMovement>; replayed: boolean }> {
    const at = this.clock.now();
    const customer = await this.customer(tx, auth, ref, true);
    if (idempotencyKey !== null) {
      const { rows } = await tx.query<LedgerRow>(
        'SELECT * FROM credit_ledger WHERE provider_id = $1 AND environment = $2 AND idempotency_key = $3',
        [auth.providerId, auth.environment, idempotencyKey],
      );
      if (rows[0] !== undefined) return { movement: toMovement(rows[0]), replayed: true };
    }
    const delta = await this.delta(tx, auth, input);
    let productRef: string | null = null;
    if (input.productRef !== undefined) {
      const product = await findProduct(tx, auth, input.productRef);
      if (product === undefined)
        throw new NotFoundError('product_not_found', `No product ${input.productRef}`);
      productRef = product.reference;
    }
    await tx.query(
      `INSERT INTO credit_balances (customer_id, balance, updated_at) VALUES ($1, 0, $2) ON CONFLICT (customer_id) DO NOTHING`,
      [customer.id, at],
    );
    const { rows: balances } = await tx.query<{ balance: number }>(
      'SELECT balance FROM credit_balances WHERE customer_id = $1 FOR UPDATE',
      [customer.id],
    );
    const before = balances[0]?.balance ?? 0;
    const after = before + delta;
    // Balances are exact integers: past 2^53 - 1 a JavaScript number cannot hold them.
    if (!Number.isSafeInteger(delta) || !Number.isSafeInteger(after)) {
      throw new ValidationError([
        {
          path: input.units === undefined ? '/amount' : '/units',
          message: `would take the balance past ${Number.MAX_SAFE_INTEGER}, the largest supported`,
          location: 'body',
        },
      ]);
    }
    if (after < 0) {
      throw new ConflictError(
        'insufficient_credits',
        `The customer has ${before} credits; this movement needs ${-delta}`,
        {
          credits: before,
        },
      );
    }
    const { rows } = await tx.query<LedgerRow>(
      `INSERT INTO credit_ledger (id, provider_id, environment, customer_id, kind, amount, balance_after, reason, product_ref,
                                  idempotency_key, metadata, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING *`,
      [
        newId(ID.creditMovement),
        auth.providerId,
        auth.environment,
        customer.id,
        input.kind,
        delta,
        after,
        input.reason ?? null,
        productRef,
        idempotencyKey,
        input.metadata ?? {},
        at,
      ],
    );
    await tx.query('UPDATE credit_balances SET balance = $2, updated_at = $3 WHERE customer_id = $1', [
      customer.id,
      after,
      at,
    ]);
    const row = rows[0];
    if (row === undefined) throw new Error('ledger insert returned no row');

    const object = {
      customerId: customer.id,
      providerId: auth.providerId,
      credits: after,
      amount: delta,
      productRef,
    };
    await writeEvent(tx, { ...auth, type: EVENT[input.kind], object, at, idempotencyKey });
    const threshold = await this.threshold(tx, auth.providerId);
    if (before >= threshold && after < threshold) {
      await writeEvent(tx, { ...auth, type: 'customer.credit.low_balance', object, at, idempotencyKey });
    }
    if (before > 0 && after === 0) {
      await writeEvent(tx, { ...auth, type: 'customer.credit.exhausted', object, at, idempotencyKey });
    }
    // Usage priced in credits (units × the plan's creditsPerUnit) is a usage charge.
    if (input.kind === 'debit' && input.units !== undefined && input.planRef !== undefined) {
      const plan = await findPlan(tx, auth, input.planRef);
      await writeEvent(tx, {
        ...auth,
        type: 'usage.charged',
        object: {
          id: row.id,
          customer: customer.id,
          product: plan?.product_id ?? null,
          plan: input.planRef,
          quantity: input.units,
          creditsPerUnit: plan?.credits_per_unit ?? null,
          credits: -delta,
          balance: after,
          created: unixSeconds(at),
        },
        at,
        idempotencyKey,
      });
    }
    return { movement: toMovement(row), replayed: false };
  }

  private async delta(
    tx: PoolClient,
    auth: AuthContext,
    input: Static<typeof CreditMovementCreate>,
  ): Promise<number> {
    const problem = (path: string, message: string) =>
      new ValidationError([{ path, message, location: 'body' }]);
    if (input.kind !== 'debit' && (input.units !== undefined || input.planRef !== undefined)) {
      throw problem('/units', 'units and planRef are only for debits');
    }
    if (input.kind === 'adjustment') {
      if (input.amount === undefined || input.amount === 0)
        throw problem('/amount', 'is required and must not be 0 for an adjustment');
      return input.amount;
    }
    if (input.kind === 'debit' && input.units !== undefined) {
      if (input.amount !== undefined) throw problem('/amount', 'send either amount or units, not both');
      if (input.planRef === undefined)
        throw problem('/planRef', 'is required with units (its creditsPerUnit prices them)');
      const plan = await findPlan(tx, auth, input.planRef);
      if (plan === undefined) throw new NotFoundError('plan_not_found', `No plan ${input.planRef}`);
      return -(input.units * plan.credits_per_unit);
    }
    if (input.amount === undefined || input.amount <= 0)
      throw problem('/amount', `is required and must be positive for ${input.kind}`);
    return input.kind === 'debit' ? -input.amount : input.amount;
  }

  async settings(auth: AuthContext) {
    return { lowBalanceThreshold: await this.threshold(this.pool, auth.providerId) };
  }

  async updateSettings(auth: AuthContext, input: { lowBalanceThreshold: number }) {
    await this.pool.query('UPDATE providers SET low_balance_threshold = $2, updated_at = $3 WHERE id = $1', [
      auth.providerId,
      input.lowBalanceThreshold,
      this.clock.now(),
    ]);
    return this.settings(auth);
  }
}
