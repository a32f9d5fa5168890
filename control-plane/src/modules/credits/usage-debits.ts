import { ID, type Logger, newId } from '@mcp-meter/contracts/kit';
import type { UsageReader } from '@mcp-meter/contracts/usage';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient, type Queryable } from '../../db/pool';
import { lockCustomerRow } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import type { Tenant } from '../products/repository';
import { writeCreditEvents } from './events';
import {
  creditPaidTenants,
  insertMovement,
  lockUsageTotals,
  setUsageDebited,
  usageDebited,
} from './repository';

type Totals = { credits: number; calls: number };

/**
 * Debits credit balances for the calls they paid for. Every admitted call of a credit-paid plan
 * carries the credits it spent on its usage record; the balance row keeps how many of those
 * credits (and calls) have been debited so far. A settlement reads the customer's totals from
 * ClickHouse and debits the difference in one movement (`kind: usage`), so the work is
 * idempotent by construction: a rerun, a crash midway or two replicas debit each credit once,
 * and records that arrive late are debited by the next settlement.
 *
 * Aggregation rule: one `customer.credit.debited` (and one `usage.charged`) per customer per
 * settlement, covering every call recorded since the previous one. Settlements run with every
 * scheduler pass (SCHEDULER_INTERVAL_MS), and before a balance is read or moved.
 */
export class UsageDebits {
  /** Told after a settlement's debit has committed (auto top-up). */
  private debited: (tenant: Tenant, customerId: string) => void = () => undefined;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly reader: UsageReader,
    private readonly logger: Logger,
  ) {}

  onDebited(listener: (tenant: Tenant, customerId: string) => void): void {
    this.debited = listener;
  }

  /** Scheduler job: settles every customer of every tenant with a credit-paid plan. */
  async settleDue(): Promise<number> {
    let debited = 0;
    for (const tenant of await creditPaidTenants(this.pool)) {
      try {
        debited += await this.settleTenant(tenant);
      } catch (error) {
        // ClickHouse away: nothing is lost, the totals are read again next time.
        this.logger.warn({ err: error, provider: tenant.providerId }, 'credit usage not settled');
      }
    }
    return debited;
  }

  /** Settles one customer (before its balance is shown); a failure to read usage leaves it for later. */
  async settle(tenant: Tenant, customerId: string): Promise<void> {
    try {
      const totals = await this.totals(this.pool, tenant, customerId);
      if (
        totals !== undefined &&
        (await inTransaction(this.pool, (tx) => this.debit(tx, tenant, customerId, totals)))
      )
        this.debited(tenant, customerId);
    } catch (error) {
      this.logger.warn({ err: error, customer: customerId }, 'credit usage not settled');
    }
  }

  /** `settle` inside a transaction that is about to move the same balance. */
  async settleIn(tx: PoolClient, tenant: Tenant, customerId: string): Promise<void> {
    let totals: Totals | undefined;
    try {
      // Through the caller's connection: waiting for another one while holding it could starve the pool.
      totals = await this.totals(tx, tenant, customerId);
    } catch (error) {
      this.logger.warn({ err: error, customer: customerId }, 'credit usage not settled');
      return;
    }
    if (totals !== undefined) await this.debit(tx, tenant, customerId, totals);
  }

  private async totals(db: Queryable, tenant: Tenant, customerId: string): Promise<Totals | undefined> {
    const meter = await findMeter(db, tenant.providerId, tenant.environment, REQUESTS_METER);
    if (meter === undefined) return undefined;
    const usage = await this.reader.creditUsage({ ...tenant, meterRef: meter.id, customerRef: customerId });
    return usage.get(customerId);
  }

  private async settleTenant(tenant: Tenant): Promise<number> {
    const meter = await findMeter(this.pool, tenant.providerId, tenant.environment, REQUESTS_METER);
    if (meter === undefined) return 0;
    const usage = await this.reader.creditUsage({ ...tenant, meterRef: meter.id });
    const debited = await usageDebited(this.pool, tenant);
    let count = 0;
    for (const [customerId, totals] of usage) {
      if (totals.credits <= (debited.get(customerId) ?? 0)) continue;
      if (await inTransaction(this.pool, (tx) => this.debit(tx, tenant, customerId, totals)))
        this.debited(tenant, customerId);
      count++;
    }
    return count;
  }

  /** Debits what `totals` holds beyond what was debited, under the balance row's lock; whether it did. */
  private async debit(tx: PoolClient, tenant: Tenant, customerId: string, totals: Totals): Promise<boolean> {
    const at = this.clock.now();
    // The customer before the balance, as grants and top-up checks lock them: one order for
    // every transaction that moves a balance, so none waits for another in a cycle.
    await lockCustomerRow(tx, customerId);
    const current = await lockUsageTotals(tx, customerId, at);
    const credits = totals.credits - current.usageDebited;
    if (credits <= 0) return false;
    const calls = Math.max(0, totals.calls - current.usageCalls);
    const after = current.balance - credits;
    const row = await insertMovement(tx, {
      id: newId(ID.creditMovement),
      provider_id: tenant.providerId,
      environment: tenant.environment,
      customer_id: customerId,
      kind: 'usage',
      amount: -credits,
      balance_after: after,
      reason: `${calls} ${calls === 1 ? 'call' : 'calls'}`,
      product_ref: null,
      idempotency_key: null,
      metadata: { calls: String(calls) },
      created_at: at,
    });
    await setUsageDebited(
      tx,
      customerId,
      {
        balance: after,
        usageDebited: totals.credits,
        usageCalls: Math.max(totals.calls, current.usageCalls),
      },
      at,
    );
    await writeCreditEvents(tx, tenant, {
      kind: 'usage',
      customerId,
      before: current.balance,
      after,
      productRef: null,
      at,
      idempotencyKey: null,
      extra: { calls },
    });
    await writeEvent(tx, {
      ...tenant,
      type: 'usage.charged',
      object: {
        id: row.id,
        customer: customerId,
        quantity: calls,
        credits,
        balance: after,
        created: unixSeconds(at),
      },
      at,
    });
    return true;
  }
}
