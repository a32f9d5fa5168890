import type { Logger } from '@mcp-meter/contracts/kit';
import { seal, unseal } from '@mcp-meter/contracts/snapshots';
import type Stripe from 'stripe';
import type { Clock } from '../../clock';
import type { Pool, Queryable } from '../../db/pool';
import { DomainError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { type PaymentProcessor, type Processors, SandboxProcessor } from '../payments/processor';
import {
  type Movement,
  type MovementKind,
  movementOf,
  type ReconciliationReport,
  reconcile,
  type StripeBalanceTransaction,
} from './reconciliation';
import {
  type ConnectionRow,
  connectedProviders,
  deleteConnection,
  findConnection,
  stripeMovements,
  upsertConnection,
} from './repository';
import { type StripeApi, StripeProcessor, stripeClient, translate } from './stripe';

const LIVE_ONLY =
  'A payment processor is connected with the live secret key; sandbox always uses the sandbox processor';

/**
 * Which processor serves a provider's environment, and the provider's Stripe connection: the
 * sandbox processor for every sandbox key; for live, the provider's own Stripe account once
 * connected (its secret key and webhook signing secret, sealed), else 409 payments_not_configured.
 */
export class ProcessorService implements Processors {
  private readonly sandbox = new SandboxProcessor();
  /** Clients per provider, made again when the provider connects another key. */
  private readonly clients = new Map<string, { sealed: string; stripe: Stripe }>();
  private lastReconciledDay: string | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly secretKey: Buffer,
    private readonly api: StripeApi,
  ) {}

  async current(auth: Pick<AuthContext, 'providerId' | 'environment'>): Promise<PaymentProcessor> {
    if (auth.environment === 'sandbox') return this.sandbox;
    return new StripeProcessor(await this.stripeOf(auth.providerId));
  }

  async named(
    auth: Pick<AuthContext, 'providerId' | 'environment'>,
    name: string,
    db: Queryable,
  ): Promise<PaymentProcessor> {
    if (name === 'sandbox') return this.sandbox;
    if (name === 'stripe') return new StripeProcessor(await this.stripeOf(auth.providerId, db));
    throw new Error(`no payment processor named ${name}`);
  }

  /** Whether Stripe pays out this balance itself (a live balance of a connected provider). */
  async paysOut(auth: Pick<AuthContext, 'providerId' | 'environment'>): Promise<boolean> {
    return (
      auth.environment === 'live' &&
      (await findConnection(this.pool, auth.providerId, 'stripe')) !== undefined
    );
  }

  /**
   * PUT /v1/ui/processors/stripe: connects (or replaces) the provider's Stripe account. The key
   * is tried on Stripe first (the account it belongs to), so a wrong key is a 400 now rather
   * than a failed charge later.
   */
  async connectStripe(auth: AuthContext, input: { secretKey: string; webhookSigningSecret: string }) {
    if (auth.environment !== 'live') throw new DomainError('forbidden', LIVE_ONLY);
    let account: Stripe.Account;
    try {
      account = await stripeClient(this.api, input.secretKey).accounts.retrieveCurrent();
    } catch (error) {
      const status = (error as { statusCode?: number }).statusCode;
      if (status === 401 || status === 403)
        throw new ValidationError([
          { path: '/secretKey', message: 'Stripe refused this key', location: 'body' },
        ]);
      throw new DomainError(
        'processor_unavailable',
        `Stripe could not be reached: ${(error as Error).message}`,
      );
    }
    const row = await upsertConnection(this.pool, {
      provider_id: auth.providerId,
      processor: 'stripe',
      secret_key_sealed: seal(this.secretKey, input.secretKey),
      webhook_secret_sealed: seal(this.secretKey, input.webhookSigningSecret),
      key_last4: input.secretKey.slice(-4),
      key_mode: input.secretKey.includes('_live_') ? 'live' : 'test',
      account: account.id,
      connected_at: this.clock.now(),
    });
    this.clients.delete(auth.providerId);
    return this.view(row);
  }

  async showStripe(auth: AuthContext) {
    if (auth.environment !== 'live') throw new DomainError('forbidden', LIVE_ONLY);
    const row = await findConnection(this.pool, auth.providerId, 'stripe');
    return row === undefined ? { connected: false as const } : this.view(row);
  }

  async disconnectStripe(auth: AuthContext) {
    if (auth.environment !== 'live') throw new DomainError('forbidden', LIVE_ONLY);
    await deleteConnection(this.pool, auth.providerId, 'stripe');
    this.clients.delete(auth.providerId);
    return { connected: false as const };
  }

  /** The provider's Stripe client and webhook signing secret; undefined when not connected. */
  async stripeConnection(providerId: string): Promise<{ stripe: Stripe; webhookSecret: string } | undefined> {
    const row = await findConnection(this.pool, providerId, 'stripe');
    if (row === undefined) return undefined;
    return { stripe: this.clientOf(row), webhookSecret: unseal(this.secretKey, row.webhook_secret_sealed) };
  }

  /**
   * Our ledger's movements of the provider's Stripe balance in [from, to) against Stripe's
   * balance transactions of the same window (all pages). 409 payments_not_configured without
   * a connection; 503 processor_unavailable when Stripe cannot be read.
   */
  async reconcile(providerId: string, window: { from: Date; to: Date }): Promise<ReconciliationReport> {
    const stripe = await this.stripeOf(providerId);
    const ours: Movement[] = (await stripeMovements(this.pool, providerId, window)).flatMap((row) =>
      row.stripe_id === null
        ? []
        : [
            {
              kind: row.kind as MovementKind,
              stripeId: row.stripe_id,
              amount: Number(row.amount),
              currency: row.currency,
              ref: row.ref,
            },
          ],
    );
    const theirs: Movement[] = [];
    const fees: Record<string, number> = {};
    try {
      for await (const bt of stripe.balanceTransactions.list({
        created: {
          gte: Math.floor(window.from.getTime() / 1000),
          lt: Math.floor(window.to.getTime() / 1000),
        },
        limit: 100,
        expand: ['data.source'],
      })) {
        fees[bt.currency] = (fees[bt.currency] ?? 0) + bt.fee;
        const movement = movementOf(bt as unknown as StripeBalanceTransaction);
        if (movement !== undefined) theirs.push(movement);
      }
    } catch (error) {
      return translate(error);
    }
    return reconcile(window, ours, theirs, fees);
  }

  /**
   * Scheduler job: once a day per process, yesterday (UTC) of every connected provider is
   * reconciled; differences are logged as a warning with the whole report, never corrected.
   */
  async reconcileYesterday(logger: Logger): Promise<number> {
    const now = this.clock.now();
    const day = now.toISOString().slice(0, 10);
    if (this.lastReconciledDay === day) return 0;
    this.lastReconciledDay = day;
    const to = new Date(`${day}T00:00:00.000Z`);
    const from = new Date(to.getTime() - 86_400_000);
    let reconciled = 0;
    for (const providerId of await connectedProviders(this.pool)) {
      try {
        const report = await this.reconcile(providerId, { from, to });
        if (report.balanced)
          logger.info({ provider: providerId, matched: report.matched }, 'stripe reconciled');
        else logger.warn({ provider: providerId, report }, 'stripe reconciliation found differences');
        reconciled++;
      } catch (error) {
        logger.warn({ provider: providerId, err: error }, 'stripe reconciliation failed');
      }
    }
    return reconciled;
  }

  private async stripeOf(providerId: string, db: Queryable = this.pool): Promise<Stripe> {
    const row = await findConnection(db, providerId, 'stripe');
    if (row === undefined)
      throw new DomainError(
        'payments_not_configured',
        'No live payment processor is connected; connect Stripe at PUT /v1/ui/processors/stripe (card payments work in sandbox)',
      );
    return this.clientOf(row);
  }

  private clientOf(row: ConnectionRow): Stripe {
    const cached = this.clients.get(row.provider_id);
    if (cached !== undefined && cached.sealed === row.secret_key_sealed) return cached.stripe;
    const stripe = stripeClient(this.api, unseal(this.secretKey, row.secret_key_sealed));
    this.clients.set(row.provider_id, { sealed: row.secret_key_sealed, stripe });
    return stripe;
  }

  private view(row: ConnectionRow) {
    return {
      connected: true as const,
      last4: row.key_last4,
      mode: row.key_mode,
      account: row.account,
      connectedAt: row.connected_at.toISOString(),
    };
  }
}
