import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, ValidationError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { findCustomer } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findPlan } from '../plans/repository';
import { findProduct } from '../products/repository';
import { writeCreditEvents } from './events';
import {
  findBalance,
  findMovementByKey,
  insertMovement,
  type LedgerRow,
  listMovements,
  lockBalance,
  lowBalanceThreshold,
  setBalance,
  setLowBalanceThreshold,
} from './repository';
import type { CreditMovement, CreditMovementCreate } from './schemas';
import type { UsageDebits } from './usage-debits';

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
  /** Tells the proxy's entitlements that the credits available to a customer changed (after commit). */
  private fundsChanged: (customerId: string) => Promise<void> = async () => undefined;
  /** Told after a movement that lowered a balance has committed (auto top-up). */
  private lowered: (tenant: AuthContext, customerId: string) => void = () => undefined;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly usage?: UsageDebits,
  ) {}

  onFundsChanged(listener: (customerId: string) => Promise<void>): void {
    this.fundsChanged = listener;
  }

  onBalanceLowered(listener: (tenant: AuthContext, customerId: string) => void): void {
    this.lowered = listener;
  }

  /** After a caller's transaction that moved credits (`moveIn`) has committed. */
  async announce(customerId: string): Promise<void> {
    await this.fundsChanged(customerId);
  }

  private async customer(db: Pool | PoolClient, auth: AuthContext, ref: string, forUpdate = false) {
    const customer = await findCustomer(db, auth, ref, { forUpdate });
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${ref}`);
    return customer;
  }

  private threshold(db: Pool | PoolClient, providerId: string): Promise<number> {
    return lowBalanceThreshold(db, providerId);
  }

  /** The balance, with the customer's calls recorded so far debited first. */
  async balance(auth: AuthContext, ref: string) {
    const customer = await this.customer(this.pool, auth, ref);
    await this.usage?.settle(auth, customer.id);
    const balance = await findBalance(this.pool, customer.id);
    return {
      customerRef: customer.id,
      credits: balance?.balance ?? 0,
      lowBalanceThreshold: await this.threshold(this.pool, auth.providerId),
      updatedAt: balance?.updated_at.toISOString() ?? null,
    };
  }

  async list(auth: AuthContext, ref: string, query: { limit: number; cursor?: string | undefined }) {
    const customer = await this.customer(this.pool, auth, ref);
    const rows = await listMovements(this.pool, customer.id, {
      before: decodeCursor(query.cursor) ?? null,
      limit: query.limit + 1,
    });
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
    const moved = await inTransaction(this.pool, (tx) => this.moveIn(tx, auth, ref, input, idempotencyKey));
    if (!moved.replayed) {
      await this.announce(moved.movement.customerRef);
      if (moved.movement.amount < 0) this.lowered(auth, moved.movement.customerRef);
    }
    return moved;
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
      const done = await findMovementByKey(tx, auth, idempotencyKey);
      if (done !== undefined) return { movement: toMovement(done), replayed: true };
    }
    const delta = await this.delta(tx, auth, input);
    let productRef: string | null = null;
    if (input.productRef !== undefined) {
      const product = await findProduct(tx, auth, input.productRef);
      if (product === undefined)
        throw new NotFoundError('product_not_found', `No product ${input.productRef}`);
      productRef = product.reference;
    }
    // Usage not yet debited is settled first, so a debit sees the balance the calls left.
    await this.usage?.settleIn(tx, auth, customer.id);
    const before = await lockBalance(tx, customer.id, at);
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
    const row = await insertMovement(tx, {
      id: newId(ID.creditMovement),
      provider_id: auth.providerId,
      environment: auth.environment,
      customer_id: customer.id,
      kind: input.kind,
      amount: delta,
      balance_after: after,
      reason: input.reason ?? null,
      product_ref: productRef,
      idempotency_key: idempotencyKey,
      metadata: input.metadata ?? {},
      created_at: at,
    });
    await setBalance(tx, customer.id, after, at);
    await writeCreditEvents(tx, auth, {
      kind: input.kind,
      customerId: customer.id,
      before,
      after,
      productRef,
      at,
      idempotencyKey,
    });
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
    await setLowBalanceThreshold(this.pool, auth.providerId, input.lowBalanceThreshold, this.clock.now());
    return this.settings(auth);
  }
}
