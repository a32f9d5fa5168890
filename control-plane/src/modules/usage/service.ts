import { buildUsageRecord, type UsagePublisher, type UsageReader, type UsageRecord } from '@mcp-meter/ingest';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { NotFoundError, UnavailableError, ValidationError } from '../../errors';
import { findMeter, type Meter, REQUESTS_METER } from '../meters/repository';
import type { AuthContext } from '../providers/service';

export interface MeterEventInput {
  customerRef: string;
  meterName?: string | undefined;
  value?: number | undefined;
  properties?: Record<string, unknown> | undefined;
  timestamp?: string | undefined;
  id?: string | undefined;
  idempotencyKey?: string | undefined;
}

function parseInstant(value: string | undefined, field: string, fallback: Date): Date {
  if (value === undefined) return fallback;
  const parsed = /^\d{4}-\d{2}-\d{2}($|T)/.test(value) ? new Date(value) : new Date(Number.NaN);
  if (Number.isNaN(parsed.getTime())) {
    throw new ValidationError([
      { path: `/${field}`, message: 'must be an ISO 8601 date or date-time', location: 'querystring' },
    ]);
  }
  return parsed;
}

export class UsageService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly publisher: UsagePublisher,
    private readonly reader: UsageReader,
  ) {}

  private async meter(auth: AuthContext, ref: string): Promise<Meter> {
    const meter = await findMeter(this.pool, auth.providerId, auth.environment, ref);
    if (meter === undefined || meter.status !== 'active')
      throw new NotFoundError('meter_not_found', `No meter ${ref}`);
    return meter;
  }

  /** Answers only after the bus has durably accepted the record. */
  async record(auth: AuthContext, input: MeterEventInput): Promise<UsageRecord> {
    if (input.id !== undefined && input.idempotencyKey !== undefined && input.id !== input.idempotencyKey) {
      throw new ValidationError([
        { path: '/idempotencyKey', message: 'must equal id when both are sent', location: 'body' },
      ]);
    }
    const meter = await this.meter(auth, input.meterName ?? REQUESTS_METER);
    const built = buildUsageRecord(
      { ...input, id: input.id ?? input.idempotencyKey },
      { ...auth, meterRef: meter.id, meterName: meter.name, now: this.clock.now() },
    );
    if (built.errors !== undefined)
      throw new ValidationError(built.errors.map((e) => ({ ...e, location: 'body' })));
    try {
      await this.publisher.publish([built.record]);
    } catch {
      throw new UnavailableError(
        'usage_bus_unavailable',
        'Usage could not be accepted right now; retry with the same id',
      );
    }
    return built.record;
  }

  async total(
    auth: AuthContext,
    meterRef: string,
    query: { from?: string | undefined; to?: string | undefined; customerRef?: string | undefined },
  ) {
    const meter = await this.meter(auth, meterRef);
    const from = parseInstant(query.from, 'from', new Date(0));
    const to = parseInstant(query.to, 'to', this.clock.now());
    if (from.getTime() >= to.getTime()) {
      throw new ValidationError([{ path: '/to', message: 'must be after from', location: 'querystring' }]);
    }
    let total: Awaited<ReturnType<UsageReader['total']>>;
    try {
      total = await this.reader.total({
        ...auth,
        meterRef: meter.id,
        customerRef: query.customerRef,
        from,
        to,
      });
    } catch {
      throw new UnavailableError(
        'usage_store_unavailable',
        'Usage data is unavailable right now; retry shortly',
      );
    }
    return {
      meterRef: meter.id,
      meterName: meter.name,
      customerRef: query.customerRef ?? null,
      from: from.toISOString(),
      to: to.toISOString(),
      ...total,
    };
  }
}
