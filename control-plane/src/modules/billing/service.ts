import type { UsageReader } from '@mcp-meter/contracts/usage';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { NotFoundError, UnavailableError } from '../../errors';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import { findPlan, settingsOf } from '../plans/repository';
import { pricingOf } from '../plans/rules';
import type { AuthContext } from '../providers/service';
import { findPurchase } from '../purchases/repository';
import { priceUsage } from './pricing';
import type { UpcomingInvoice } from './schemas';

/**
 * Turning usage into money. So far: the upcoming invoice, what the current period of a
 * usage-based or hybrid purchase has run up, priced by its plan (see pricing.ts).
 */
export class BillingService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly reader: UsageReader,
  ) {}

  /**
   * The usage lines the purchase's current period would close with if it ended now: the units the
   * plan's limit counts on the requests meter since the period started (calls admitted for this
   * product and usage reported for it; refused calls never count), less the free units, priced.
   */
  async upcoming(auth: AuthContext, purchaseRef: string): Promise<UpcomingInvoice> {
    const purchase = await findPurchase(this.pool, auth, purchaseRef, false);
    if (purchase === undefined) throw new NotFoundError('purchase_not_found', `No purchase ${purchaseRef}`);
    const plan = await findPlan(this.pool, auth, purchase.plan_id);
    if (plan === undefined) throw new NotFoundError('plan_not_found', `No plan ${purchase.plan_id}`);
    const settings = settingsOf(plan);
    const asOf = this.clock.now();
    const pricesUsage = settings.type === 'usage-based' || settings.type === 'hybrid';
    let units = 0;
    if (pricesUsage) {
      const meter = await findMeter(this.pool, auth.providerId, auth.environment, REQUESTS_METER);
      if (meter === undefined) throw new Error(`provider ${auth.providerId} has no requests meter`);
      try {
        units = await this.reader.limitUsage({
          ...auth,
          meterRef: meter.id,
          customerRef: purchase.customer_id,
          productId: purchase.product_id,
          from: purchase.period_start,
          to: asOf,
        });
      } catch {
        throw new UnavailableError('usage_store_unavailable', 'Usage storage is unreachable; try again');
      }
    }
    const priced = pricesUsage
      ? priceUsage(pricingOf(settings), BigInt(units), BigInt(settings.freeUnits), 'call')
      : { billableUnits: 0n, lines: [], total: 0 };
    return {
      purchaseRef: purchase.id,
      customerRef: purchase.customer_id,
      planRef: purchase.plan_id,
      currency: purchase.currency,
      periodStart: purchase.period_start.toISOString(),
      periodEnd: purchase.period_end === null ? null : purchase.period_end.toISOString(),
      asOf: asOf.toISOString(),
      usage: { units, freeUnits: settings.freeUnits, billableUnits: Number(priced.billableUnits) },
      lines: priced.lines,
      total: priced.total,
    };
  }
}
