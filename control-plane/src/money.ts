import type { Logger } from '@mcp-meter/contracts/kit';
import type { SnapshotStore } from '@mcp-meter/contracts/snapshots';
import type { UsageReader, UsageSettlement } from '@mcp-meter/contracts/usage';
import type { Clock } from './clock';
import type { ControlPlaneConfig } from './config';
import type { Pool } from './db/pool';
import { Invoicing } from './modules/billing/invoicing';
import { CheckoutService } from './modules/checkout/service';
import { CheckoutSessions } from './modules/checkout/sessions';
import { CouponService } from './modules/coupons/service';
import type { CreditService } from './modules/credits/service';
import type { UsageDebits } from './modules/credits/usage-debits';
import type { CustomerService } from './modules/customers/service';
import { DisputeService } from './modules/disputes/service';
import { Ledger } from './modules/ledger/service';
import { CardExpiry } from './modules/payments/card-expiry';
import { ChargeJournal } from './modules/payments/journal';
import { Refunder } from './modules/payments/refunder';
import { RefundService } from './modules/payments/refunds';
import { PaymentService } from './modules/payments/service';
import { PayoutService } from './modules/payouts/service';
import { StripeEvents } from './modules/processors/events';
import { ProcessorService } from './modules/processors/service';
import { BillingScheduler } from './modules/purchases/scheduler';
import { PurchaseService } from './modules/purchases/service';
import { TestClockService } from './modules/test-clocks/service';

/** What the money side of the control plane is built from (service.ts passes its own). */
export interface MoneyDeps {
  pool: Pool;
  /** The payments bulkhead: connections for transactions that may wait on a processor. */
  paying: Pool;
  /** The charge journal's own connections; without, it writes in the charge's transaction. */
  journalPool: Pool | undefined;
  clock: Clock;
  logger: Logger;
  snapshots: SnapshotStore;
  reader: UsageReader;
  settlement: UsageSettlement;
  publicUrl: string;
  config: Pick<ControlPlaneConfig, 'secretKey'> &
    Partial<
      Pick<
        ControlPlaneConfig,
        'stripeApiUrl' | 'platformFee' | 'dunningRetryHours' | 'usageLatenessMs' | 'payouts'
      >
    >;
  credits: CreditService;
  usageDebits: UsageDebits;
  /** Billing details a checkout collects are saved through it (events, processor sync). */
  customers: CustomerService;
}

/**
 * The control plane's money, wired: processors, payments and their charge journal, purchases and
 * billing's scheduler, checkout, refunds, disputes, payouts and Stripe's events. The scheduler's
 * jobs that move money on their own are added here, in the order they run on each pass.
 */
export function buildMoney(d: MoneyDeps) {
  const { paying, clock, logger, config } = d;
  const processors = new ProcessorService(paying, clock, config.secretKey, {
    url: config.stripeApiUrl ?? 'https://api.stripe.com',
  });
  const ledger = new Ledger(config.platformFee ?? { bps: 0, fixed: 0 });
  const disputes = new DisputeService(d.pool, clock);
  const journal = new ChargeJournal(paying, clock, processors, logger, d.journalPool);
  const payments = new PaymentService(paying, clock, processors, ledger, disputes, journal, logger);
  const invoicing = new Invoicing(clock, payments, d.reader);
  const refunder = new Refunder(clock, processors, ledger, d.journalPool, logger);
  const coupons = new CouponService(d.pool, clock);
  const checkoutSessions = new CheckoutSessions(d.pool, clock, d.publicUrl, coupons);
  const purchases = new PurchaseService(
    paying,
    clock,
    d.snapshots,
    logger,
    payments,
    invoicing,
    refunder,
    checkoutSessions,
    coupons,
  );
  const scheduler = new BillingScheduler(paying, clock, purchases, payments, invoicing, d.settlement, {
    dunningRetryHours: config.dunningRetryHours ?? [24, 72, 168],
    trialReminderDays: 3,
    renewalReminderDays: 7,
    usageLatenessMs: config.usageLatenessMs ?? 300_000,
    settleTimeoutMs: 10_000,
    logger,
  });
  const checkout = new CheckoutService(
    paying,
    clock,
    checkoutSessions,
    purchases,
    payments,
    d.credits,
    processors,
    d.customers,
  );
  const refunds = new RefundService(paying, clock, processors, purchases, refunder, logger);
  const testClocks = new TestClockService(paying, clock, scheduler);
  scheduler.addJob(() => checkout.expireDue());
  scheduler.addJob(() => journal.runDue());
  scheduler.addJob(() => d.usageDebits.settleDue());
  d.credits.onFundsChanged((customerId) => purchases.publishCustomer(customerId));
  const payouts = new PayoutService(
    paying,
    clock,
    config.payouts ?? { schedule: 'daily', delayDays: 2 },
    logger,
  );
  payouts.leaveToProcessor((auth) => processors.paysOut(auth));
  const stripeEvents = new StripeEvents(
    paying,
    clock,
    processors,
    refunds,
    disputes,
    payouts,
    purchases,
    checkout,
    journal,
    d.customers,
    logger,
  );
  const cardExpiry = new CardExpiry(paying, clock, logger);
  scheduler.addCustomerJob((clockId) => cardExpiry.announceDue(clockId));
  scheduler.addJob(() => payouts.payOutDue());
  scheduler.addJob(() => processors.reconcileYesterday(logger));
  scheduler.addJob(() => payouts.settleDue());
  scheduler.addJob(() => refunds.settleDue());
  return {
    processors,
    disputes,
    journal,
    payments,
    invoicing,
    checkoutSessions,
    coupons,
    purchases,
    scheduler,
    checkout,
    refunds,
    testClocks,
    payouts,
    stripeEvents,
  };
}
