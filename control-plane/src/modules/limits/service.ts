import type { Logger } from '@mcp-meter/contracts/kit';
import {
  type CounterScope,
  type CounterStore,
  counterKey,
  DEFAULT_LIMITER_OPTIONS,
  type LeaseCharge,
  LeasedLimiter,
  LimiterUnavailableError,
  type LimitTarget,
} from '@mcp-meter/contracts/limits';
import {
  splitNanos,
  toNanos,
  type UsagePublisher,
  type UsageReader,
  type UsageRecorder,
  type UsageSettlement,
} from '@mcp-meter/contracts/usage';
import { callRecord, type Environment, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import { atTestTime, type Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, UnavailableError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import type { CheckoutSessions } from '../checkout/sessions';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import { productsWithDefaultPlan } from '../plans/repository';
import { accessProductIds } from '../purchases/repository';
import { type Governing, GoverningPlans } from './governing';
import {
  type Paywall,
  PaywallOffers,
  type PaywallReason,
  type PaywallRequest,
  paywallFields,
} from './paywall';
import { findLimitSubject, type LimitSubject, listenForSubjectChanges } from './repository';
import { CounterSeeds } from './seeds';
import { SubjectCache } from './subject-cache';

/**
 * Longest the subject cache's connection may take to connect, listen or answer a barrier (one
 * normally takes well under a millisecond); past it, checks read PostgreSQL until it listens again.
 */
const SUBJECT_LISTENER_TIMEOUT_MS = 2_000;

/** `POST /v1/sdk/limits`: whose limit, on which product, and whether to spend a unit. */
export interface LimitCheck {
  customerRef: string;
  productRef: string;
  meterName?: string | undefined;
  consume?: boolean | undefined;
}

/** The answer of `POST /v1/sdk/limits`. */
export interface LimitAnswer {
  withinLimits: boolean;
  limit: number | null;
  used: number;
  remaining: number | null;
  /**
   * Units counted beyond the limit, when there are any: calls a proxy admitted on its outage
   * grace while Redis was away, or usage reported through the usage API past the limit.
   */
  overLimit?: number;
  planId?: string;
  /** Credit-paid plans: credits still available to calls (the balance less calls not yet debited). */
  creditBalance?: number;
  creditsPerUnit?: number;
  /** Why the call is (or would be) refused. */
  reason?: PaywallReason;
  checkoutUrl?: string;
  checkoutSessionId?: string;
  offeredPlanId?: string;
  portalUrl?: string;
}

/**
 * Usage limits (spec 1, rules 1–2) for the SDK's limit check and the proxy's paywall. The limit
 * counts calls admitted on the provider's requests meter per customer, product, plan and period,
 * through the same leased counters the proxy uses; counters start from ClickHouse.
 */
export class LimitService {
  readonly limiter: LeasedLimiter;
  /** Each check's subject, without reading PostgreSQL each time and never older than a committed write. */
  readonly subjects: SubjectCache;
  private readonly offers: PaywallOffers;
  /** Where counters start (ClickHouse), and the counters of a plan's check. */
  private readonly seeds: CounterSeeds;
  private readonly plans: GoverningPlans;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    reader: UsageReader,
    private readonly publisher: UsagePublisher,
    private readonly counters: CounterStore,
    checkout: CheckoutSessions,
    private readonly logger: Logger,
    /** The ingest watermark: a counter starts only from stored usage that has caught up. */
    settlement: UsageSettlement,
    /**
     * Where a consuming check's record goes: a write-ahead spool published in batches (the
     * services as deployed), or, without one, straight to the bus, each check awaiting its ack.
     */
    private readonly recorder?: UsageRecorder,
  ) {
    // With a spool, checks lease budget as a proxy does (one store call serves many checks, the
    // leases shrinking to one unit at the limit): the spool names each lease as it opens, so the
    // next start after a crash settles it at what was recorded. Without one, a lease left by a
    // crash would count as spent until it expires: one unit per lease then, none taken ahead.
    this.limiter = new LeasedLimiter(
      counters,
      recorder === undefined
        ? { maxLease: 1, divisor: 1, holdMs: 1_000, idleMs: 0, leaseTtlMs: 10_000, renewAhead: false }
        : DEFAULT_LIMITER_OPTIONS,
      recorder,
    );
    this.offers = new PaywallOffers(pool, clock, checkout, logger);
    this.seeds = new CounterSeeds(pool, clock, reader, settlement);
    this.plans = new GoverningPlans(pool, clock);
    this.subjects = new SubjectCache(
      (heard, lost) => listenForSubjectChanges(pool, SUBJECT_LISTENER_TIMEOUT_MS, heard, lost),
      logger,
    );
  }

  /**
   * Settles the leases a crashed predecessor left open at what its spool recorded: the units it
   * leased and never recorded go back to the customers.
   */
  async settleInherited(): Promise<number> {
    const inherited = this.recorder?.inheritedCharges ?? [];
    if (inherited.length === 0) return 0;
    this.limiter.settleLater(inherited);
    await this.limiter.settlePending();
    return inherited.length;
  }

  /** Calls admitted in the counter's period so far, from ClickHouse: the start of a counter. */
  seed(scope: CounterScope & { periodEnd: Date | null }): Promise<{ used: number; expiresAtMs: number }> {
    return this.seeds.seed(scope);
  }

  /** Credits the customer's admitted calls have spent, from ClickHouse: the start of its credit counter. */
  creditSeed(scope: {
    providerId: string;
    environment: Environment;
    customerId: string;
  }): Promise<{ used: number; expiresAtMs: number }> {
    return this.seeds.creditSeed(scope);
  }

  /** `POST /v1/sdk/limits`: check, and with `consume` admit and record one call. */
  async check(auth: AuthContext, input: LimitCheck) {
    try {
      return await this.checkOnce(auth, input);
    } catch (error) {
      if (!(error instanceof LimiterUnavailableError)) throw error;
      if (error.cause instanceof DomainError) throw error.cause;
      throw new UnavailableError(
        'service_unavailable',
        'Usage limits cannot be checked right now; retry shortly',
      );
    }
  }

  private async checkOnce(auth: AuthContext, input: LimitCheck) {
    // Customer, test clock, product, purchase and governing plan: kept in memory, read in one
    // round trip when not.
    const subject = await this.subjects.get(auth, input.customerRef, input.productRef, () =>
      findLimitSubject(this.pool, auth, input.customerRef, input.productRef),
    );
    // A sandbox customer on a test clock is checked at the clock's time (its periods, its records).
    if (subject.testTime !== undefined)
      return atTestTime(subject.testTime, () => this.checkSubject(auth, input, subject));
    return this.checkSubject(auth, input, subject);
  }

  private async checkSubject(auth: AuthContext, input: LimitCheck, subject: LimitSubject) {
    if (subject.customerId === undefined)
      throw new NotFoundError('customer_not_found', `No customer ${input.customerRef}`);
    if (subject.productId === undefined)
      throw new NotFoundError('product_not_found', `No product ${input.productRef}`);
    const customer = { id: subject.customerId };
    const product = { id: subject.productId };
    if (input.meterName !== undefined && input.meterName !== REQUESTS_METER) {
      const meter = await findMeter(this.pool, auth.providerId, auth.environment, input.meterName);
      if (meter === undefined) throw new NotFoundError('meter_not_found', `No meter ${input.meterName}`);
      throw new ValidationError([
        {
          path: '/meterName',
          message: "plan limits count the provider's requests meter; record other meters with meter-events",
          location: 'body',
        },
      ]);
    }
    const consume = input.consume ?? true;
    const tenant = { providerId: auth.providerId, environment: auth.environment };
    const governing = await this.plans.given(subject.purchase, subject.plan, () => subject.fundedCredits);
    const scopeFor = (g: Governing): CounterScope => ({
      ...tenant,
      customerId: customer.id,
      productId: product.id,
      planId: g.planId,
      periodStart: g.periodStart,
    });

    if (governing === undefined) {
      if (consume) await this.record(auth, customer.id, product.id, 'paywall', undefined);
      const paywall = await this.paywall({
        ...tenant,
        customerId: customer.id,
        productId: product.id,
        reason: 'no_plan',
      });
      return {
        withinLimits: false,
        limit: 0,
        used: 0,
        remaining: 0,
        reason: 'no_plan' as const,
        ...paywallFields(paywall),
      };
    }
    const scope = scopeFor(governing);
    const target = governing.limit === null ? undefined : this.seeds.target(scope, governing);
    const creditTarget =
      governing.credits === null ? undefined : this.seeds.creditTarget(scope, governing.credits);
    let refusedBy: 'limit_reached' | 'credits_exhausted' | undefined;
    if (consume) {
      const charges: LeaseCharge[] = [];
      if (target !== undefined) {
        const admitted = await this.limiter.admit(target);
        if (!admitted.allowed) refusedBy = 'limit_reached';
        else if (admitted.charge !== undefined) charges.push(admitted.charge);
      }
      if (refusedBy === undefined && creditTarget !== undefined) {
        const paid = await this.limiter.admit(creditTarget);
        if (!paid.allowed) {
          refusedBy = 'credits_exhausted';
          // The call is refused: the unit of the plan's limit it took goes back.
          if (target !== undefined) await this.limiter.giveBack(target);
          charges.length = 0;
        } else if (paid.charge !== undefined) charges.push(paid.charge);
      }
      await this.record(
        auth,
        customer.id,
        product.id,
        refusedBy === undefined ? 'success' : 'paywall',
        governing.planId,
        refusedBy === undefined ? governing.credits?.perUnit : undefined,
        charges,
      );
    }
    let base: LimitAnswer;
    if (target === undefined || governing.limit === null) {
      const { used } = await this.seeds.seed({ ...scope, periodEnd: governing.periodEnd });
      base = { withinLimits: true, limit: null, used, remaining: null, planId: governing.planId };
    } else {
      // A consuming check's count comes from the lease it was admitted from, with no second
      // round trip: every admission of this process, and what the others had admitted or leased
      // when this process last leased (at most holdMs ago; with one unit per lease, just now).
      const counted =
        (consume ? this.limiter.seenReserved(target.key) : undefined) ?? (await this.reserved(target));
      const used = Math.min(governing.limit, counted);
      const remaining = governing.limit - used;
      base = {
        withinLimits: remaining > 0,
        limit: governing.limit,
        used,
        remaining,
        ...(counted > governing.limit ? { overLimit: counted - governing.limit } : {}),
        planId: governing.planId,
      };
    }
    if (creditTarget !== undefined && governing.credits !== null) {
      const available = governing.credits.funded - (await this.reserved(creditTarget));
      base.creditBalance = available;
      base.creditsPerUnit = governing.credits.perUnit;
      if (!consume && available < governing.credits.perUnit && base.withinLimits) {
        base.withinLimits = false;
        refusedBy = 'credits_exhausted';
      }
    }
    if (consume) base.withinLimits = refusedBy === undefined;
    else if (!base.withinLimits) refusedBy ??= 'limit_reached';
    if (refusedBy === undefined) return base;
    base.reason = refusedBy;
    try {
      const paywall = await this.paywall({
        ...tenant,
        customerId: customer.id,
        productId: product.id,
        reason: refusedBy,
        planId: governing.planId,
      });
      return { ...base, ...paywallFields(paywall) };
    } catch (error) {
      // Nothing to sell past this limit: the answer says so by carrying no checkout.
      if (error instanceof ConflictError && (error.code === 'no_higher_plan' || error.code === 'no_top_up'))
        return base;
      throw error;
    }
  }

  /**
   * Usage reported through the usage API on the requests meter counts against plan limits: each
   * record is added to the live counter of the product it names (`productId`), or, naming none,
   * of every product the customer is limited on (its purchases and the free default plans).
   * Counters not started yet count it when they are seeded from ClickHouse.
   */
  async reportUsage(auth: AuthContext, records: readonly UsageRecord[]): Promise<void> {
    // Exact sums in billionths: adding the values as numbers could make 0.1 + 0.2 + 0.7 more than 1.
    const units = new Map<string, { customerId: string; productId: string | undefined; nanos: bigint }>();
    for (const record of records) {
      if (record.meterName !== REQUESTS_METER) continue;
      const named = record.properties?.productId;
      const productId = typeof named === 'string' && named !== '' ? named : undefined;
      const key = `${record.customerRef}\u0000${productId ?? ''}`;
      const entry = units.get(key) ?? { customerId: record.customerRef, productId, nanos: 0n };
      entry.nanos += toNanos(record.value);
      units.set(key, entry);
    }
    if (units.size === 0) return;
    let defaults: string[] | undefined;
    for (const { customerId, productId, nanos } of units.values()) {
      const value = splitNanos(nanos);
      let products: string[];
      if (productId !== undefined) products = [productId];
      else {
        defaults ??= await productsWithDefaultPlan(this.pool, auth);
        products = [...new Set([...(await accessProductIds(this.pool, customerId)), ...defaults])];
      }
      for (const product of products) {
        const governing = await this.plans.of(auth, customerId, product);
        if (governing === undefined || governing.limit === null) continue;
        const scope = {
          ...auth,
          customerId,
          productId: product,
          planId: governing.planId,
          periodStart: governing.periodStart,
        };
        try {
          await this.counters.report(counterKey(scope), value.units, value.nanos);
        } catch (error) {
          // The record is already durable; the counter catches up when it is next seeded.
          this.logger.warn(
            { err: error, customer: customerId },
            'reported usage not added to a limit counter',
          );
        }
      }
    }
  }

  /** Calls admitted and budget leased out: what is no longer available in the period. */
  private async reserved(target: LimitTarget): Promise<number> {
    const peek = await this.limiter.peek(target);
    return peek.used + peek.leased;
  }

  /** One record on the requests meter, like the proxy writes for a tool call. */
  private async record(
    auth: AuthContext,
    customerId: string,
    productId: string,
    outcome: 'success' | 'paywall',
    planId: string | undefined,
    credits?: number,
    charges?: readonly LeaseCharge[],
  ) {
    const meter = await this.seeds.requestsMeter(auth);
    const record = callRecord(
      { ...auth, meterRef: meter.id, meterName: meter.name },
      customerId,
      this.clock.now().toISOString(),
      {
        source: 'sdk.limits',
        outcome,
        productId,
        ...(planId === undefined ? {} : { planId }),
        admitted: outcome === 'success',
        ...(credits === undefined ? {} : { credits }),
      },
    );
    if (this.recorder !== undefined) {
      // In the spool before the answer goes: the bus gets it with the next batch.
      this.recorder.emit(record, charges === undefined || charges.length === 0 ? undefined : charges);
      await this.recorder.spooled();
      return;
    }
    try {
      await this.publisher.publish([record]);
    } catch {
      throw new UnavailableError('usage_bus_unavailable', 'Usage could not be recorded right now; retry');
    }
  }

  /** A checkout session to offer a refused customer (paywall.ts). */
  paywall(request: PaywallRequest): Promise<Paywall> {
    return this.offers.paywall(request);
  }

  async close(): Promise<void> {
    await Promise.all([this.limiter.close(), this.subjects.close()]);
  }
}
