import {
  type CounterScope,
  type CounterSeed,
  CREDIT_COUNTER_TTL_MS,
  counterExpiry,
  counterKey,
  creditKey,
  type LimitTarget,
} from '@mcp-meter/contracts/limits';
import type { UsageReader, UsageSettlement } from '@mcp-meter/contracts/usage';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { UnavailableError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findMeter, type Meter, REQUESTS_METER } from '../meters/repository';
import type { Governing } from './governing';

/** Longest a counter's seed waits for ingest to store what is already on the usage bus. */
const SEED_SETTLE_MS = 5_000;

/**
 * Where limit counters start: the usage stored in ClickHouse for the counter's period (calls
 * admitted) or for the customer (credits spent), once ingest has caught up with the usage bus;
 * and the counters a plan's check goes through (its limit, its credits), each with its seed.
 */
export class CounterSeeds {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly reader: UsageReader,
    /** The ingest watermark: a counter starts only from stored usage that has caught up. */
    private readonly settlement: UsageSettlement,
  ) {}

  /** Each tenant's requests meter: made with the provider, never archived, so read once. */
  private readonly requestsMeters = new Map<string, Meter>();

  async requestsMeter(tenant: AuthContext): Promise<Meter> {
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
  async seed(scope: CounterScope & { periodEnd: Date | null }): Promise<CounterSeed> {
    const meter = await this.requestsMeter(scope);
    await this.caughtUp();
    const now = this.clock.now();
    try {
      const { used, fractionNanos } = await this.reader.limitCount({
        providerId: scope.providerId,
        environment: scope.environment,
        meterRef: meter.id,
        customerRef: scope.customerId,
        productId: scope.productId,
        from: scope.periodStart,
        to: new Date(now.getTime() + 60_000),
      });
      return { used, fractionNanos, expiresAtMs: onRedisClock(counterExpiry(scope.periodEnd, now), now) };
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

  creditTarget(scope: CounterScope, credits: { perUnit: number; funded: number }): LimitTarget {
    return {
      key: creditKey(scope),
      limit: credits.funded,
      cost: credits.perUnit,
      seed: () => this.creditSeed(scope),
    };
  }

  target(scope: CounterScope, governing: Governing): LimitTarget {
    return {
      key: counterKey(scope),
      limit: governing.limit ?? Number.POSITIVE_INFINITY,
      seed: () => this.seed({ ...scope, periodEnd: governing.periodEnd }),
    };
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
