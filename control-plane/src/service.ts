import { type Logger, OutboundGuard } from '@mcp-meter/contracts/kit';
import { type CounterStore, MemoryCounterStore } from '@mcp-meter/contracts/limits';
import type { SnapshotStore } from '@mcp-meter/contracts/snapshots';
import { internalToken } from '@mcp-meter/contracts/snapshots';
import type {
  UsageAnalytics,
  UsagePublisher,
  UsageReader,
  UsageRecorder,
  UsageSettlement,
} from '@mcp-meter/contracts/usage';
import { Type } from '@sinclair/typebox';
import { type Clock, ScopedClock, systemClock } from './clock';
import type { ControlPlaneConfig, WebhookConfig } from './config';
import { customerCare } from './customer-care';
import { type Pool, pingDatabase } from './db/pool';
import { type App, buildApp, warmSchemas } from './http/app';
import { sendProblem } from './http/error-handler';
import { installIdempotency } from './http/idempotency';
import { ControlPlaneMetrics, type MetricPart } from './http/metrics';
import { Problem } from './http/schemas';
import { LogMailer, type Mailer, SmtpMailer } from './mail';
import { CancellationAnalytics } from './modules/analytics/cancellations';
import { RevenueAnalytics } from './modules/analytics/revenue';
import { analyticsRoutes } from './modules/analytics/routes';
import { AnalyticsService } from './modules/analytics/service';
import { apiDocsRoutes } from './modules/api-docs/routes';
import { apiKeyRoutes } from './modules/api-keys/routes';
import { ApiKeyService } from './modules/api-keys/service';
import { billingRoutes, hostedInvoiceRoutes } from './modules/billing/routes';
import { BillingService } from './modules/billing/service';
import { checkoutRoutes, hostedCheckoutRoutes } from './modules/checkout/routes';
import type { CheckoutService } from './modules/checkout/service';
import { consoleRoutes } from './modules/console-app/routes';
import { couponRoutes } from './modules/coupons/routes';
import { creditRoutes } from './modules/credits/routes';
import { CreditService } from './modules/credits/service';
import { UsageDebits } from './modules/credits/usage-debits';
import { customerRoutes } from './modules/customers/routes';
import { CustomerService } from './modules/customers/service';
import { disputeRoutes } from './modules/disputes/routes';
import { eventRoutes } from './modules/events/routes';
import { EventService } from './modules/events/service';
import { financialRoutes } from './modules/financials/routes';
import { FinancialService } from './modules/financials/service';
import { transactionRoutes } from './modules/ledger/routes';
import { TransactionService } from './modules/ledger/service';
import { internalRoutes, limitRoutes } from './modules/limits/routes';
import { LimitService } from './modules/limits/service';
import { mcpServerRoutes } from './modules/mcp-servers/routes';
import { McpServerService } from './modules/mcp-servers/service';
import { merchantRoutes } from './modules/merchant/routes';
import { meterRoutes } from './modules/meters/routes';
import { MeterService } from './modules/meters/service';
import type { ChargeJournal } from './modules/payments/journal';
import { refundRoutes } from './modules/payments/refunds';
import { paymentRoutes } from './modules/payments/routes';
import { payoutRoutes } from './modules/payouts/routes';
import { planRoutes } from './modules/plans/routes';
import { PlanService } from './modules/plans/service';
import { processorRoutes, stripeWebhookRoutes } from './modules/processors/routes';
import { productRoutes } from './modules/products/routes';
import { ProductService } from './modules/products/service';
import { ProviderService } from './modules/providers/service';
import { purchaseRoutes } from './modules/purchases/routes';
import type { BillingScheduler } from './modules/purchases/scheduler';
import type { PurchaseService } from './modules/purchases/service';
import { ClientMetadataFetcher } from './modules/sign-in/client-metadata';
import { signInRoutes } from './modules/sign-in/routes';
import { SignInService } from './modules/sign-in/service';
import { ConsoleAudit } from './modules/team/audit';
import { consoleAuthenticator } from './modules/team/authenticate';
import { TeamMembers } from './modules/team/members';
import { memberRoutes, signupRoutes } from './modules/team/members-routes';
import { auditRoutes, teamRoutes } from './modules/team/routes';
import { TeamService } from './modules/team/service';
import { ConsoleSignups } from './modules/team/signup';
import { installTestTime, testClockRoutes } from './modules/test-clocks/routes';
import { jwksRoutes, tokenRoutes } from './modules/tokens/routes';
import { TokenService } from './modules/tokens/service';
import { usageRoutes } from './modules/usage/routes';
import { UsageService } from './modules/usage/service';
import { webhookRoutes } from './modules/webhooks/routes';
import { WebhookSender } from './modules/webhooks/sender';
import { WebhookService } from './modules/webhooks/service';
import { WebhookWorker } from './modules/webhooks/worker';
import { buildMoney } from './money';

/** GET /healthz as the OpenAPI document shows it: for load balancers and orchestrators. */
const HEALTH_SCHEMA = {
  tags: ['health'],
  summary: 'Whether this control plane can serve: 200 once PostgreSQL answers, 503 otherwise',
  description:
    'For load balancers and orchestrators (readiness). Checks PostgreSQL on every call; `ingest`, when this process also runs the usage consumer, gives its state. Open to anyone, no key.',
  response: {
    200: Type.Object({
      status: Type.Literal('ok'),
      ingest: Type.Optional(
        Type.Union([Type.Literal('starting'), Type.Literal('running'), Type.Literal('failed')], {
          description: "The usage consumer's state, when this process runs it",
        }),
      ),
    }),
    503: Problem,
  },
};

export interface ControlPlaneDeps {
  config: Pick<ControlPlaneConfig, 'bodyLimitBytes' | 'proxyPublicUrl' | 'proxyBaseDomain'> &
    Partial<Pick<ControlPlaneConfig, 'publicUrl'>> &
    Partial<
      Pick<
        ControlPlaneConfig,
        | 'dunningRetryHours'
        | 'schedulerEnabled'
        | 'schedulerIntervalMs'
        | 'usageLatenessMs'
        | 'platformFee'
        | 'payouts'
      >
    > &
    Pick<ControlPlaneConfig, 'secretKey'> &
    Partial<
      Pick<
        ControlPlaneConfig,
        | 'webhooks'
        | 'metricsToken'
        | 'outboundAllowedHosts'
        | 'smtpUrl'
        | 'mailFrom'
        | 'mailToLog'
        | 'stripeApiUrl'
        | 'consoleSignup'
        | 'consoleDir'
      >
    >;
  logger: Logger;
  /** Usage-limit counters shared with the proxies (Redis, or one process's memory). */
  counters?: CounterStore;
  pool: Pool;
  /**
   * Connections for the services whose transactions may wait on a payment processor (charges,
   * refunds, payouts, Stripe's events): a bulkhead, so a processor that stops answering holds
   * these and the rest of the API keeps its own. Defaults to `pool`.
   */
  paymentsPool?: Pool;
  /** The charge journal's own connections (payments/journal.ts); without, it writes in the charge's transaction. */
  journalPool?: Pool;
  publisher: UsagePublisher;
  /** The limit check's records: a write-ahead spool (deploy/serve.ts); without one, published and awaited. */
  recorder?: UsageRecorder;
  reader: UsageReader;
  /** Usage analytics (the same store); without it the analytics routes answer 503. */
  analytics?: UsageAnalytics;
  /** Whether the usage bus has stored what it accepted: usage periods close only after it has. */
  settlement: UsageSettlement;
  snapshots: SnapshotStore;
  clock?: Clock;
  /** Certificates to trust, besides the system's, when fetching client metadata documents (tests). */
  outboundCa?: string;
  /** The usage consumer in this process, for /healthz: joining its group, running, or failed. */
  ingestState?: () => 'starting' | 'running' | 'failed';
  /** What this process adds to the metrics page: its usage recorder's and ingest's families. */
  metricParts?: readonly MetricPart[];
}

export interface ControlPlane {
  app: App;
  providers: ProviderService;
  mcpServers: McpServerService;
  purchases: PurchaseService;
  checkout: CheckoutService;
  /** Auto top-up, alerts and the customer portal (customer-care.ts). */
  care: ReturnType<typeof customerCare>;
  scheduler: BillingScheduler;
  /** The charge journal's pass (payments/journal.ts), run by the scheduler; tests run it alone. */
  chargeJournal: Pick<ChargeJournal, 'runDue'>;
  tokens: TokenService;
  limits: LimitService;
  webhooks: WebhookService;
  webhookWorker: WebhookWorker;
  webhookSender: WebhookSender;
}

/** Spec defaults; tests pass their own. */
export const DEFAULT_WEBHOOK_CONFIG: WebhookConfig = {
  enabled: true,
  intervalMs: 30_000,
  batchSize: 20,
  maxInFlight: 64,
  perEndpoint: 8,
  timeoutMs: 10_000,
  disableAfter: 12,
  allowedHosts: [],
};

/** Wires services and routes; the caller decides whether to listen (main) or inject (tests). */
export async function buildControlPlane(deps: ControlPlaneDeps): Promise<ControlPlane> {
  const clock = new ScopedClock(deps.clock ?? systemClock);
  const publicUrl = deps.config.publicUrl ?? 'http://127.0.0.1:8080';
  // A Stripe call inside a transaction holds its connection for as long as Stripe takes (20 s and
  // two retries at worst): ten such calls used to hold every connection of the API.
  const paying = deps.paymentsPool ?? deps.pool;
  const providers = new ProviderService(deps.pool, clock);
  const products = new ProductService(deps.pool, clock);
  const plans = new PlanService(deps.pool, clock);
  const meters = new MeterService(deps.pool, clock);
  const tokens = new TokenService(deps.pool, clock, deps.snapshots, publicUrl, deps.config.secretKey);
  const customers = new CustomerService(deps.pool, clock, tokens);
  const usageDebits = new UsageDebits(deps.pool, clock, deps.reader, deps.logger);
  const credits = new CreditService(deps.pool, clock, usageDebits);
  const money = buildMoney({
    ...{ pool: deps.pool, paying, journalPool: deps.journalPool, clock, logger: deps.logger },
    ...{ snapshots: deps.snapshots, reader: deps.reader, settlement: deps.settlement, publicUrl },
    ...{ config: deps.config, credits, usageDebits, customers },
  });
  const { processors, disputes, journal, payments, invoicing, checkoutSessions, purchases, coupons } = money;
  const { scheduler, checkout, refunds, testClocks, payouts, stripeEvents } = money;
  const transactions = new TransactionService(deps.pool);
  const financials = new FinancialService(deps.pool, clock);
  customers.onDelete((tx, auth, customerId) => purchases.endAllOf(tx, auth, customerId));
  customers.onDelete(async (tx, _auth, customerId) => void (await checkout.endAllOf(tx, customerId)));
  customers.onDetailsChanged((auth, customerId) => payments.syncCustomerDetails(auth, customerId));
  const webhookConfig = deps.config.webhooks ?? DEFAULT_WEBHOOK_CONFIG;
  const outboundAllowed = deps.config.outboundAllowedHosts ?? [];
  const originGuard = new OutboundGuard(outboundAllowed);
  // WEBHOOK_ALLOWED_HOSTS adds to the general list for webhook endpoints only.
  const webhookGuard = new OutboundGuard([...outboundAllowed, ...webhookConfig.allowedHosts]);

  const mcpServers = new McpServerService(
    deps.pool,
    clock,
    deps.snapshots,
    deps.config,
    deps.reader,
    deps.config.secretKey,
    deps.logger,
    originGuard,
  );
  const limits = new LimitService(
    deps.pool,
    clock,
    deps.reader,
    deps.publisher,
    deps.counters ?? new MemoryCounterStore(),
    checkoutSessions,
    deps.logger,
    deps.settlement,
    deps.recorder,
  );
  const mailer: Mailer =
    deps.config.smtpUrl === undefined
      ? new LogMailer(deps.logger, deps.config.mailToLog === true)
      : new SmtpMailer(deps.config.smtpUrl, deps.config.mailFrom ?? 'MCP Meter <no-reply@localhost>');
  if (deps.config.smtpUrl === undefined && deps.config.mailToLog === true)
    deps.logger.warn(
      'SMTP_URL is unset: mail, sign-in codes included, is written to the log (MAIL_TO_LOG, for development); set SMTP_URL before real customers sign in',
    );
  const clientDocuments = new ClientMetadataFetcher(originGuard, deps.outboundCa);
  const signIn = new SignInService(deps.pool, clock, tokens, mailer, clientDocuments, {
    issuer: publicUrl,
    proxyBaseDomain: deps.config.proxyBaseDomain,
    resourceOf: (subdomain) => mcpServers.proxyUrl(subdomain),
  });
  const usage = new UsageService(deps.pool, clock, deps.publisher, deps.reader, limits);
  const billing = new BillingService(
    paying,
    clock,
    invoicing,
    publicUrl,
    {
      forgive: (tx, purchase) => scheduler.forgive(tx, purchase),
      closeNow: (tx, purchase) => scheduler.closeNow(tx, purchase),
      usageSettled: () => scheduler.usageSettled(),
      publish: (rows) => purchases.publish(rows),
      payNow: (tx, purchase, invoice) => scheduler.payNow(tx, purchase, invoice),
    },
    payments,
  );

  const webhookSender = new WebhookSender(webhookGuard, webhookConfig.timeoutMs);
  const webhooks = new WebhookService(deps.pool, clock, deps.config.secretKey, webhookGuard, webhookSender);
  const webhookWorker = new WebhookWorker(deps.pool, clock, webhooks, webhookSender, {
    ...webhookConfig,
    leaseMs: webhookConfig.timeoutMs * 3,
    logger: deps.logger,
  });

  // Cookies are Secure when the service is reached over https (PUBLIC_URL).
  const secureCookies = publicUrl.startsWith('https:');
  const analytics = new AnalyticsService(deps.pool, clock, deps.analytics);
  const care = customerCare({
    ...{ pool: deps.pool, paying, clock, secureCookies, reader: deps.reader, mailer, logger: deps.logger },
    ...{ publicUrl, scheduler, credits, usageDebits },
    ...{ payments, purchases, customers, billing, checkoutSessions, coupons, signIn, analytics },
  });
  const team = new TeamService(deps.pool, clock);
  const audit = new ConsoleAudit(deps.pool, clock, deps.logger);
  const signups = new ConsoleSignups(
    deps.pool,
    clock,
    mailer,
    providers,
    team,
    deps.config.consoleSignup !== 'closed',
  );
  const apiKeys = new ApiKeyService(deps.pool, clock, providers);
  const members = new TeamMembers(deps.pool, clock, mailer, team, `${publicUrl}/console`);
  const metrics = new ControlPlaneMetrics(deps.metricParts);
  const app = await buildApp({
    metrics,
    logger: deps.logger,
    bodyLimitBytes: deps.config.bodyLimitBytes,
    publicUrl: deps.config.publicUrl,
    proxyUrl: deps.config.proxyPublicUrl,
    authenticate: consoleAuthenticator(providers, team),
    open: async (scope) => {
      await scope.register(apiDocsRoutes());
      await scope.register(consoleRoutes(deps.config.consoleDir));
      await scope.register(hostedCheckoutRoutes(checkout));
      await scope.register(hostedInvoiceRoutes(billing));
      for (const routes of care.publicRoutes) await scope.register(routes);
      await scope.register(jwksRoutes(tokens));
      await scope.register(signInRoutes(signIn, secureCookies));
      await scope.register(teamRoutes(team, audit, secureCookies));
      await scope.register(signupRoutes(signups, members, audit, secureCookies));
      await scope.register(internalRoutes(limits, internalToken(deps.config.secretKey)));
      await scope.register(stripeWebhookRoutes(stripeEvents));
      await scope.register(
        metrics.routes(
          deps.config.metricsToken,
          () => ({
            sent: webhookWorker.sent,
            delivered: webhookWorker.delivered,
            inFlight: webhookWorker.inFlightCount,
          }),
          () => webhookWorker.backlog(),
        ),
      );
      scope.get('/healthz', { schema: HEALTH_SCHEMA }, async (_request, reply) => {
        // The API answers while the usage consumer still joins its group (it catches up behind).
        const ingest = deps.ingestState?.();
        try {
          await pingDatabase(deps.pool);
          return ingest === undefined ? { status: 'ok' as const } : { status: 'ok' as const, ingest };
        } catch {
          return sendProblem(reply, 'service_unavailable', 'PostgreSQL is not reachable');
        }
      });
    },
    authenticated: async (scope) => {
      audit.install(scope);
      installIdempotency(scope, deps.pool, clock);
      installTestTime(scope, deps.pool);
      await scope.register(testClockRoutes(testClocks));
      await scope.register(merchantRoutes(providers));
      await scope.register(customerRoutes(customers));
      await scope.register(creditRoutes(credits));
      for (const routes of care.apiRoutes) await scope.register(routes);
      await scope.register(purchaseRoutes(purchases));
      await scope.register(couponRoutes(coupons, purchases));
      await scope.register(paymentRoutes(payments));
      await scope.register(processorRoutes(processors));
      await scope.register(checkoutRoutes(checkout));
      await scope.register(refundRoutes(refunds));
      await scope.register(transactionRoutes(transactions));
      await scope.register(financialRoutes(financials));
      await scope.register(disputeRoutes(disputes));
      await scope.register(payoutRoutes(payouts));
      await scope.register(tokenRoutes(tokens));
      await scope.register(productRoutes(products));
      await scope.register(planRoutes(plans));
      await scope.register(meterRoutes(meters));
      await scope.register(usageRoutes(usage));
      await scope.register(billingRoutes(billing));
      await scope.register(mcpServerRoutes(mcpServers));
      await scope.register(limitRoutes(limits));
      await scope.register(webhookRoutes(webhooks));
      await scope.register(eventRoutes(new EventService(deps.pool)));
      const cancellations = new CancellationAnalytics(deps.pool, clock);
      await scope.register(analyticsRoutes(analytics, new RevenueAnalytics(deps.pool, clock), cancellations));
      await scope.register(auditRoutes(audit));
      await scope.register(memberRoutes(members));
      await scope.register(apiKeyRoutes(apiKeys));
    },
  });
  app.addHook('onClose', async () => {
    mailer.close();
    await clientDocuments.close();
  });
  return {
    app,
    providers,
    mcpServers,
    purchases,
    checkout,
    care,
    chargeJournal: journal,
    scheduler,
    tokens,
    limits,
    webhooks,
    webhookWorker,
    webhookSender,
  };
}

export async function startControlPlane(
  deps: ControlPlaneDeps & { host: string; port: number },
): Promise<ControlPlane & { url: string; close(): Promise<void> }> {
  const controlPlane = await buildControlPlane(deps);
  const settled = await controlPlane.limits.settleInherited();
  if (settled > 0) deps.logger.info({ leases: settled }, 'limit-check leases of a previous run settled');
  // The proxy reads only snapshots: rebuild them from PostgreSQL so a fresh or flushed store is whole.
  const servers = await controlPlane.mcpServers.publishAll();
  const entitlements = await controlPlane.purchases.publishAll();
  const { replacedIssuer } = await controlPlane.tokens.publish();
  if (replacedIssuer !== undefined)
    deps.logger.warn(
      { issuer: deps.config.publicUrl, replacedIssuer },
      'another control plane published a different token issuer (its PUBLIC_URL differs): proxies now refuse the tokens it issued; every control plane of a deployment needs the same PUBLIC_URL',
    );
  deps.logger.debug({ servers, entitlements }, 'snapshots published');
  await controlPlane.app.listen({ host: deps.host, port: deps.port });
  warmSchemas(controlPlane.app, deps.logger);
  if (deps.config.schedulerEnabled !== false)
    controlPlane.scheduler.start(deps.config.schedulerIntervalMs ?? 60_000);
  if ((deps.config.webhooks ?? DEFAULT_WEBHOOK_CONFIG).enabled) controlPlane.webhookWorker.start();
  const address = controlPlane.app.server.address();
  const port = address !== null && typeof address === 'object' ? address.port : deps.port;
  return {
    ...controlPlane,
    url: `http://${deps.host}:${port}`,
    close: async () => {
      await controlPlane.scheduler.stop();
      await controlPlane.webhookWorker.stop();
      await controlPlane.app.close();
      await controlPlane.limits.close();
      await controlPlane.webhookSender.close();
    },
  };
}
