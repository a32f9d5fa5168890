import type { Logger } from '@mcp-meter/contracts/kit';
import type { UsageReader } from '@mcp-meter/contracts/usage';
import type { Clock } from './clock';
import type { Pool } from './db/pool';
import type { Mailer } from './mail';
import { alertRoutes } from './modules/alerts/routes';
import { AlertService } from './modules/alerts/service';
import type { AnalyticsService } from './modules/analytics/service';
import { autoTopUpRoutes } from './modules/auto-topups/routes';
import { AutoTopUps } from './modules/auto-topups/service';
import type { BillingService } from './modules/billing/service';
import type { CheckoutSessions } from './modules/checkout/sessions';
import type { CouponService } from './modules/coupons/service';
import type { CreditService } from './modules/credits/service';
import type { UsageDebits } from './modules/credits/usage-debits';
import { customerEmailRoutes } from './modules/customer-emails/routes';
import { CustomerEmails } from './modules/customer-emails/service';
import type { CustomerService } from './modules/customers/service';
import type { PaymentService } from './modules/payments/service';
import { PortalAccount } from './modules/portal/account';
import { PortalCodes } from './modules/portal/codes';
import { PortalDetails } from './modules/portal/details';
import { portalPageRoutes, portalSessionRoutes } from './modules/portal/routes';
import { PortalService } from './modules/portal/service';
import type { BillingScheduler } from './modules/purchases/scheduler';
import type { PurchaseService } from './modules/purchases/service';
import type { SignInService } from './modules/sign-in/service';

/**
 * What looks after a paying customer (issue 64, docs/portal.md): auto top-up, spend and usage
 * alerts, billing mail, and the portal that shows them; wired to the credit movements and the scheduler they
 * react to. Answers the services and their routes: the portal's pages are public (a link or the
 * portal cookie), the rest is API behind the provider's key.
 */
export function customerCare(deps: {
  pool: Pool;
  paying: Pool;
  clock: Clock;
  publicUrl: string;
  secureCookies: boolean;
  reader: UsageReader;
  mailer: Mailer;
  logger: Logger;
  scheduler: BillingScheduler;
  credits: CreditService;
  usageDebits: UsageDebits;
  payments: PaymentService;
  purchases: PurchaseService;
  customers: CustomerService;
  billing: BillingService;
  checkoutSessions: CheckoutSessions;
  coupons: CouponService;
  signIn: SignInService;
  analytics: AnalyticsService;
}) {
  const { credits, usageDebits, scheduler } = deps;
  // Auto top-up: checked after every movement that lowered a balance, and swept after each settlement.
  const autoTopUps = new AutoTopUps(
    deps.paying,
    deps.clock,
    credits,
    deps.payments,
    usageDebits,
    deps.logger,
  );
  credits.onBalanceLowered((tenant, customerId) => autoTopUps.fireAndForget(tenant, customerId));
  usageDebits.onDebited((tenant, customerId) => autoTopUps.fireAndForget(tenant, customerId));
  scheduler.addJob(() => autoTopUps.runDue());
  deps.customers.onDelete(async (tx, _auth, customerId) => void (await autoTopUps.endAllOf(tx, customerId)));
  const alerts = new AlertService(deps.pool, deps.clock, deps.reader, deps.mailer, deps.logger, deps.billing);
  scheduler.addJob(() => alerts.runDue());
  // Billing mail to customers: after the purchases, so a pass's renewals are mailed in that pass.
  const customerEmails = new CustomerEmails(deps.pool, deps.clock, deps.mailer, deps.logger, deps.publicUrl);
  scheduler.addJob(() => customerEmails.runDue(), 'after');
  const portal = new PortalService(deps.pool, deps.clock, deps.publicUrl, {
    credits,
    autoTopUps,
    purchases: deps.purchases,
    billing: deps.billing,
    checkoutSessions: deps.checkoutSessions,
    alerts,
    reader: deps.reader,
    accounts: deps.signIn,
    payments: deps.payments,
    analytics: deps.analytics,
  });
  const account = new PortalAccount(deps.pool, deps.publicUrl, portal, {
    payments: deps.payments,
    purchases: deps.purchases,
    checkoutSessions: deps.checkoutSessions,
    alerts,
    billing: deps.billing,
    coupons: deps.coupons,
  });
  const codes = new PortalCodes(deps.pool, deps.clock, deps.mailer, portal);
  const details = new PortalDetails(deps.pool, deps.clock, deps.mailer, deps.logger, portal, deps.customers);
  return {
    autoTopUps,
    alerts,
    customerEmails,
    portal,
    publicRoutes: [portalPageRoutes(portal, account, codes, details, deps.secureCookies)],
    apiRoutes: [
      autoTopUpRoutes(autoTopUps),
      portalSessionRoutes(portal),
      alertRoutes(alerts),
      customerEmailRoutes(customerEmails),
    ],
  };
}
