import type { Logger } from '@mcp-meter/contracts/kit';
import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import { writeEvent } from '../events/outbox';
import { insertExpiryNotice, lockNextExpiringCard } from './expiry-repository';

/**
 * Expiring cards announced before they fail a charge, as Stripe's `customer.source.expiring`
 * does: in the month a customer's default card expires, once per card, `customer.card_expiring`
 * for a customer who will be charged again (a purchase that renews, or an auto top-up turned
 * on). The provider's webhooks get it, and the customer a mail when the provider sends that kind
 * (customer-emails). A scheduler job for customers on no clock, and each test clock's advance for
 * its own, at that clock's time.
 */
export class CardExpiry {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Announces the cards due; answers how many. One card at a time, each in its own transaction. */
  async announceDue(clockId: string | null, limit = 1000): Promise<number> {
    let after = '';
    let announced = 0;
    for (let taken = 0; taken < limit; taken++) {
      const card = await inTransaction(this.pool, async (tx) => {
        const at = this.clock.now();
        const monthIndex = at.getUTCFullYear() * 12 + at.getUTCMonth();
        const row = await lockNextExpiringCard(tx, { monthIndex, clockId, after });
        if (row === undefined) return undefined;
        const eventId = newId(ID.event);
        if (await insertExpiryNotice(tx, { paymentMethodId: row.id, eventId, at })) {
          await writeEvent(tx, {
            providerId: row.provider_id,
            environment: row.environment,
            id: eventId,
            type: 'customer.card_expiring',
            object: {
              id: row.customer_id,
              object: 'customer',
              card: {
                id: row.id,
                brand: row.brand,
                last4: row.last4,
                exp_month: row.exp_month,
                exp_year: row.exp_year,
              },
            },
            at,
          });
          announced++;
        }
        return row;
      });
      if (card === undefined) break;
      after = card.id;
    }
    if (announced > 0) this.logger.info({ announced, clock: clockId }, 'expiring cards announced');
    return announced;
  }
}
