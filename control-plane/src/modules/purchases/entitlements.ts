import type { Logger } from '@mcp-meter/contracts/kit';
import { type EntitlementSnapshot, entitlementKey, type SnapshotStore } from '@mcp-meter/contracts/snapshots';
import type { Pool } from '../../db/pool';
import { fundedCredits } from '../credits/repository';
import { findPlan, type PlanRow, settingsOf } from '../plans/repository';
import { isCreditPaid } from '../plans/rules';
import { latestPurchasePerProduct, type PurchaseRow } from './repository';
import { GRANTS_ACCESS } from './state-machine';

const iso = (d: Date | null) => d?.toISOString() ?? null;

/**
 * Customers' entitlements as the proxy reads them: each purchase mirrored into the snapshot
 * store (its plan's limit and period, whether it grants access, the credits funding a plan paid
 * from credits), after the change is committed.
 */
export class EntitlementPublisher {
  constructor(
    private readonly pool: Pool,
    private readonly snapshots: SnapshotStore,
    private readonly logger: Logger,
  ) {}

  /** Republishes one customer's entitlements: the credits available to it changed. */
  async publishCustomer(customerId: string): Promise<void> {
    await this.publish(await latestPurchasePerProduct(this.pool, customerId));
  }

  /** Rebuilds every customer's entitlement per product from PostgreSQL (at start, or after Redis lost it). */
  async publishAll(): Promise<number> {
    const rows = await latestPurchasePerProduct(this.pool);
    for (const row of rows) await this.publish([row]);
    return rows.length;
  }

  /**
   * Mirrors purchases into the snapshot store for the proxy, after the commit. A failed write
   * is logged, not raised: the purchase is committed, and snapshots are rebuilt from PostgreSQL
   * at start.
   */
  async publish(rows: PurchaseRow[], knownPlan?: PlanRow): Promise<void> {
    for (const row of rows) {
      try {
        const plan =
          knownPlan?.id === row.plan_id
            ? knownPlan
            : await findPlan(
                this.pool,
                { providerId: row.provider_id, environment: row.environment },
                row.plan_id,
              );
        const snapshot: EntitlementSnapshot = {
          v: 1,
          providerId: row.provider_id,
          environment: row.environment,
          customerId: row.customer_id,
          productId: row.product_id,
          purchaseId: row.id,
          planId: row.plan_id,
          status: row.status,
          grantsAccess: GRANTS_ACCESS.has(row.status),
          limit: plan?.usage_limit ?? null,
          meterRef: plan?.meter_id ?? null,
          periodStart: row.period_start.toISOString(),
          periodEnd: iso(row.period_end),
          credits:
            plan !== undefined && isCreditPaid(settingsOf(plan))
              ? {
                  perUnit: plan.credits_per_unit,
                  funded: (await fundedCredits(this.pool, [row.customer_id])).get(row.customer_id) ?? 0,
                }
              : null,
        };
        // A superseded purchase must not overwrite its successor's entry for the same product.
        if (!snapshot.grantsAccess && rows.length > 1) continue;
        await this.snapshots.set(
          entitlementKey({
            providerId: row.provider_id,
            environment: row.environment,
            customerId: row.customer_id,
            productId: row.product_id,
          }),
          JSON.stringify(snapshot),
        );
      } catch (error) {
        this.logger.warn(
          { err: error, purchase: row.id },
          'entitlement snapshot not written; it is rebuilt at the next start',
        );
      }
    }
  }
}
