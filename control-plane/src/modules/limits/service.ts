import type { Logger } from '@mcp-meter/contracts/kit';
import {
  type CounterScope,
  type CounterStore,
  CREDIT_COUNTER_TTL_MS,
  calendarPeriod,
  counterExpiry,
  counterKey,
  creditKey,
  DEFAULT_LIMITER_OPTIONS,
  type LeaseCharge,
  LeasedLimiter,
  LimiterUnavailableError,
  type LimitTarget,
} from '@mcp-meter/contracts/limits';
import type { UsagePublisher, UsageReader, UsageRecorder, UsageSettlement } from '@mcp-meter/contracts/usage';
import { callRecord, type Environment, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import { atTestTime, type Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, UnavailableError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import type { CheckoutSessions } from '../checkout/sessions';
import { fundedCredits } from '../credits/repository';
import { findMeter, type Meter, REQUESTS_METER } from '../meters/repository';
import { findDefaultPlanId, findPlan, productsWithDefaultPlan } from '../plans/repository';
import { isCreditPaid, requiresPayment } from '../plans/rules';
import { type AccessPurchase, accessProductIds, findAccessPurchase } from '../purchases/repository';
import {
  type Paywall,
  PaywallOffers,
  type PaywallReason,
  type PaywallRequest,
  paywallFields,
} from './paywall';
import {
  findLimitSubject,
  type GoverningPlanRow,
  type LimitSubject,
  listenForSubjectChanges,
} from './repository';
import { SubjectCache } from './subject-cache';

/**
 * Longest the subject cache's connection may take to connect, listen or answer a barrier (one
 * normally takes well under a millisecond); past it, checks read PostgreSQL until it listens again.
 */
const SUBJECT_LISTENER_TIMEOUT_MS = 2_000;
/** Longest a counter's seed waits for ingest to store what is already on the usage bus. */
const SEED_SETTLE_MS = 5_000;

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
}

interface Governing {
  planId: string;
  limit: number | null;
  periodStart: Date;
  periodEnd: Date | null;
  /** A plan paid from credits: each call also spends `perUnit` of the customer's credits. */
  credits: { perUnit: number; funded: number } | null;
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

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly reader: UsageReader,
    private readonly publisher: UsagePublisher,
    private readonly counters: CounterStore,
    checkout: CheckoutSessions,
    private readonly logger: Logger,
    /** The ingest watermark: a counter starts only from stored usage that has caught up. */
    private readonly settlement: UsageSettlement,
    /**
     * Where a consuming check's record goes: a write-ahead spool published in batches (the
     * services as deployed), or, without one, straight to the bus, each check awaiting its ack.
     */
    private readonly recorder?: UsageRecorder,
  ) {
    // With a spool, checks lease budget as a proxy does (one store call serves many checks, the
    // leases shrinking to one unit at the limit): the spool names each lease as it opens, so the
    // next start after a crash settles it at what was recorded. Without one, a lease left by a
    // crash would count as spent until it expires: one unit per lease then.
    this.limiter = new LeasedLimiter(
      counters,
      recorder === undefined
        ? { maxLease: 1, divisor: 1, holdMs: 1_000, idleMs: 0, leaseTtlMs: 10_000 }
        : DEFAULT_LIMITER_OPTIONS,
      recorder,
    );
    this.offers = new PaywallOffers(pool, clock, checkout, logger);
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

  /** Each tenant's requests meter: made with the provider, never archived, so read once. */
  private readonly requestsMeters = new Map<string, Meter>();

  private async requestsMeter(tenant: AuthContext): Promise<Meter> {
    const key = `${tenant.providerId}:${tenant.environment}`;
    const known = this.requestsMeters.get(key);
    if (known !== undefined) return known;
    const meter = await findMeter(this.pool, tenant.providerId, tenant.environment, REQUESTS_METER);
    if (meter === undefined) throw new Error(`provider ${tenant.providerId} has no requests meter`);
    if (this.requestsMeters.size >= 10_000) this.requestsMeters.clear();
    this.requestsMeters.set(key, meter);
    return meter;
  }

  /**
   * A counter starts from ClickHouse, which must first hold every record already on the usage
   * bus: after a Redis flush or a full restart, records still travelling (or replayed from a
   * crashed proxy's spool) would otherwise be left out and their allowance handed back. While
   * ingest lags past SEED_SETTLE_MS the seed is refused (503): the proxy applies its outage
   * policy rather than start a counter short.
   */
  private async caughtUp(): Promise<void> {
    if (!(await this.settlement.settled(SEED_SETTLE_MS)))
      throw new UnavailableError(
        'usage_store_unavailable',
        'Stored usage is still catching up with the usage bus; try again shortly',
      );
  }

  /** Calls admitted in the counter's period so far, from ClickHouse: the start of a counter. */
  async seed(
    scope: CounterScope & { periodEnd: Date | null },
  ): Promise<{ used: number; expiresAtMs: number }> {
    const meter = await this.requestsMeter(scope);
    await this.caughtUp();
    const now = this.clock.now();
    try {
      const used = await this.reader.limitUsage({
        providerId: scope.providerId,
        environment: scope.environment,
        meterRef: meter.id,
        customerRef: scope.customerId,
        productId: scope.productId,
        from: scope.periodStart,
        to: new Date(now.getTime() + 60_000),
      });
      return { used, expiresAtMs: onRedisClock(counterExpiry(scope.periodEnd, now), now) };
    } catch {
      throw new UnavailableError('usage_store_unavailable', 'Usage storage is unreachable; try again');
    }
  }

  /**
   * Credits the customer's admitted calls have spent, from ClickHouse: the start of its credit
   * counter, which lives for CREDIT_COUNTER_TTL_MS and is then started again.
   */
  async creditSeed(scope: {
    providerId: string;
    environment: Environment;
    customerId: string;
  }): Promise<{ used: number; expiresAtMs: number }> {
    const meter = await this.requestsMeter(scope);
    await this.caughtUp();
    try {
      const usage = await this.reader.creditUsage({
        ...scope,
        meterRef: meter.id,
        customerRef: scope.customerId,
      });
      return {
        used: usage.get(scope.customerId)?.credits ?? 0,
        expiresAtMs: onRedisClock(this.clock.now().getTime() + CREDIT_COUNTER_TTL_MS, this.clock.now()),
      };
    } catch {
      throw new UnavailableError('usage_store_unavailable', 'Usage storage is unreachable; try again');
    }
  }

  private creditTarget(scope: CounterScope, credits: { perUnit: number; funded: number }): LimitTarget {
    return {
      key: creditKey(scope),
      limit: credits.funded,
      cost: credits.perUnit,
      seed: () => this.creditSeed(scope),
    };
  }

  private target(scope: CounterScope, governing: Governing): LimitTarget {
    return {
      key: counterKey(scope),
      limit: governing.limit ?? Number.POSITIVE_INFINITY,
      seed: () => this.seed({ ...scope, periodEnd: governing.periodEnd }),
    };
  }

  /** The customer's access-granting purchase of the product, or the product's free default plan. */
  private async governing(
    auth: AuthContext,
    customerId: string,
    productId: string,
  ): Promise<Governing | undefined> {
    const purchase = await findAccessPurchase(this.pool, customerId, productId);
    const planId = purchase?.plan_id ?? (await findDefaultPlanId(this.pool, productId));
    const plan = planId === undefined ? undefined : await findPlan(this.pool, auth, planId);
    return this.governingOf(
      purchase,
      plan,
      async () => (await fundedCredits(this.pool, [customerId])).get(customerId) ?? 0,
    );
  }

  /**
   * The plan that governs, given the access purchase (if any) and the row of its plan or, without
   * a purchase, of the product's default plan (which governs only while it is free).
   */
  private async governingOf(
    purchase: Pick<AccessPurchase, 'plan_id' | 'period_start' | 'period_end'> | undefined,
    plan: GoverningPlanRow | undefined,
    /** Every credit made available to the customer: read only for a plan paid from credits. */
    funded: () => Promise<number> | number,
  ): Promise<Governing | undefined> {
    if (purchase !== undefined) {
      const creditPaid =
        plan !== undefined && isCreditPaid({ type: plan.type, billingModel: plan.billing_model });
      return {
        planId: purchase.plan_id,
        limit: plan?.usage_limit ?? null,
        periodStart: purchase.period_start,
        periodEnd: purchase.period_end,
        credits: creditPaid
          ? {
              perUnit: plan.credits_per_unit,
              funded: await funded(),
            }
          : null,
      };
    }
    if (
      plan === undefined ||
      requiresPayment({
        price: plan.price,
        basePrice: plan.base_price,
        setupFee: plan.setup_fee,
        unitAmount: plan.unit_amount,
        tiers: plan.tiers,
      })
    )
      return undefined;
    const period = calendarPeriod(plan.billing_cycle, plan.billing_interval_days, this.clock.now());
    return {
      planId: plan.id,
      limit: plan.usage_limit,
      periodStart: period.start,
      periodEnd: period.end,
      credits: null,
    };
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
    const governing = await this.governingOf(subject.purchase, subject.plan, () => subject.fundedCredits);
    const scopeFor = (g: Governing): CounterScope => ({
      ...tenant,
      customerId: customer.id,
      productId: product.id,
      planId: g.planId,
      periodStart: g.periodStart,
    });

    if (governing === undefined) {
      if (consume) await this.record(auth, customer.id, product.id, 'paywall');
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
    const target = governing.limit === null ? undefined : this.target(scope, governing);
    const creditTarget = governing.credits === null ? undefined : this.creditTarget(scope, governing.credits);
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
        refusedBy === undefined ? governing.credits?.perUnit : undefined,
        charges,
      );
    }
    let base: LimitAnswer;
    if (target === undefined || governing.limit === null) {
      const { used } = await this.seed({ ...scope, periodEnd: governing.periodEnd });
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
    const units = new Map<string, { customerId: string; productId: string | undefined; units: number }>();
    for (const record of records) {
      if (record.meterName !== REQUESTS_METER) continue;
      const named = record.properties?.productId;
      const productId = typeof named === 'string' && named !== '' ? named : undefined;
      const key = `${record.customerRef}\u0000${productId ?? ''}`;
      const entry = units.get(key) ?? { customerId: record.customerRef, productId, units: 0 };
      entry.units += Number(record.value);
      units.set(key, entry);
    }
    if (units.size === 0) return;
    let defaults: string[] | undefined;
    for (const { customerId, productId, units: value } of units.values()) {
      let products: string[];
      if (productId !== undefined) products = [productId];
      else {
        defaults ??= await productsWithDefaultPlan(this.pool, auth);
        products = [...new Set([...(await accessProductIds(this.pool, customerId)), ...defaults])];
      }
      for (const product of products) {
        const governing = await this.governing(auth, customerId, product);
        if (governing === undefined || governing.limit === null) continue;
        const scope = {
          ...auth,
          customerId,
          productId: product,
          planId: governing.planId,
          periodStart: governing.periodStart,
        };
        try {
          await this.counters.report(counterKey(scope), Math.ceil(value));
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
    credits?: number,
    charges?: readonly LeaseCharge[],
  ) {
    const meter = await this.requestsMeter(auth);
    const record = callRecord(
      { ...auth, meterRef: meter.id, meterName: meter.name },
      customerId,
      this.clock.now().toISOString(),
      {
        source: 'sdk.limits',
        outcome,
        productId,
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

  /**
   * A checkout session for the customer and product, reusing an open one for the same plan.
   * The plan offered: the first purchasable plan among `planIds`; past a limit, the cheapest
   * plan on sale with a higher limit than the one reached (unlimited counts as higher), and
   * none (409 no_higher_plan) when there is no such plan; with no plan at all, the cheapest
   * plan of the product.
   */
  /** A checkout session to offer a refused customer (paywall.ts). */
  paywall(request: PaywallRequest): Promise<Paywall> {
    return this.offers.paywall(request);
  }

  async close(): Promise<void> {
    await Promise.all([this.limiter.close(), this.subjects.close()]);
  }
}

/**
 * A counter's expiry, worked out on the control plane's clock, as the time Redis expires it on
 * its own wall clock: the same time to live. They differ for a sandbox test clock's customers,
 * whose periods lie months away from the real time; a counter never lives less than a minute.
 */
function onRedisClock(expiresAtMs: number, now: Date): number {
  return Date.now() + Math.max(60_000, expiresAtMs - now.getTime());
}
