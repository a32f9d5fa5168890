import { createHash } from 'node:crypto';
import {
  countBuckets,
  type Granularity,
  type UsagePublisher,
  type UsageReader,
} from '@mcp-meter/contracts/usage';
import { buildUsageRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import {
  ConflictError,
  DomainError,
  type FieldProblem,
  isDependencyOutage,
  NotFoundError,
  UnavailableError,
  ValidationError,
} from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findCustomer, resolveCustomerRefs } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findMeter, type Meter, REQUESTS_METER } from '../meters/repository';
import { findProduct } from '../products/repository';
import { findAccessPurchase } from '../purchases/repository';
import { MAX_BULK_RECORDS } from './schemas';

export interface MeterEventInput {
  customerRef: string;
  meterName?: string | undefined;
  value?: number | undefined;
  properties?: Record<string, unknown> | undefined;
  timestamp?: string | undefined;
  id?: string | undefined;
  idempotencyKey?: string | undefined;
}

export interface UsageInput {
  customerRef: string;
  productRef: string;
  actionType?: string | undefined;
  units?: number | undefined;
  outcome?: string | undefined;
  properties?: Record<string, unknown> | undefined;
  timestamp?: string | undefined;
  id?: string | undefined;
  idempotencyKey?: string | undefined;
}

interface Range {
  from?: string | undefined;
  to?: string | undefined;
}

/** Hourly buckets over a year would be a 9,000-row answer; beyond this, ask for a coarser size. */
const MAX_BUCKETS = 2000;
const DAY_MS = 86_400_000;

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

export const accepted = (r: UsageRecord) => ({
  id: r.id,
  meterRef: r.meterRef,
  meterName: r.meterName,
  customerRef: r.customerRef,
  value: r.value,
  timestamp: r.timestamp,
});

export class UsageService {
  private readonly knownMeters = new Map<string, Meter>();

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly publisher: UsagePublisher,
    private readonly reader: UsageReader,
    /** Plan limits count usage reported here too (the limit service's live counters). */
    private readonly limits: {
      reportUsage(auth: AuthContext, records: readonly UsageRecord[]): Promise<void>;
    },
  ) {}

  /**
   * A meter by id or name. The last answer for each is remembered, so that usage reads, which
   * need nothing else from PostgreSQL, keep working while it is unreachable (a meter's id and
   * name never change; its status may be a moment old).
   */
  private async meter(auth: AuthContext, ref: string): Promise<Meter> {
    const key = `${auth.providerId}\u0000${auth.environment}\u0000${ref}`;
    let meter: Meter | undefined;
    try {
      meter = await findMeter(this.pool, auth.providerId, auth.environment, ref);
    } catch (error) {
      const known = this.knownMeters.get(key);
      if (known !== undefined && isDependencyOutage(error)) return known;
      throw error;
    }
    if (meter === undefined) throw new NotFoundError('meter_not_found', `No meter ${ref}`);
    if (this.knownMeters.size >= 10_000) this.knownMeters.clear();
    this.knownMeters.set(key, meter);
    return meter;
  }

  private async activeMeter(auth: AuthContext, ref: string): Promise<Meter> {
    const meter = await this.meter(auth, ref);
    if (meter.status !== 'active')
      throw new ConflictError('meter_archived', `Meter ${ref} is archived and accepts no records`);
    return meter;
  }

  private build(auth: AuthContext, meter: Meter, input: MeterEventInput, path: string, now: Date) {
    const errors: FieldProblem[] = [];
    if (input.id !== undefined && input.idempotencyKey !== undefined && input.id !== input.idempotencyKey) {
      errors.push({
        path: `${path}/idempotencyKey`,
        message: 'must equal id when both are sent',
        location: 'body',
      });
    }
    const built = buildUsageRecord(
      { ...input, id: input.id ?? input.idempotencyKey },
      { ...auth, meterRef: meter.id, meterName: meter.name, now },
      path,
    );
    if (built.errors !== undefined)
      errors.push(...built.errors.map((e) => ({ ...e, location: 'body' as const })));
    return { record: built.record, errors };
  }

  /** Answers only after the bus has durably accepted every record. */
  private async publish(records: UsageRecord[]): Promise<void> {
    try {
      await this.publisher.publish(records);
    } catch {
      throw new UnavailableError(
        'usage_bus_unavailable',
        'Usage could not be accepted right now; retry with the same ids',
      );
    }
  }

  /**
   * Every record is kept under the customer's id (`cus_…`), whichever alias the caller used
   * (id or externalRef), so usage reads by either find it; a ref that names no customer is
   * refused rather than stored as an orphan no one can bill.
   */
  private async customerIds(
    auth: AuthContext,
    inputs: readonly MeterEventInput[],
    path: (i: number) => string,
  ) {
    const refs = inputs
      .map((i) => i.customerRef)
      .filter((ref): ref is string => typeof ref === 'string' && ref !== '');
    const ids = await resolveCustomerRefs(this.pool, auth, refs);
    const missing = inputs.flatMap((input, index) =>
      typeof input.customerRef === 'string' && input.customerRef !== '' && !ids.has(input.customerRef)
        ? [
            {
              path: `${path(index)}/customerRef`,
              message: `no customer ${input.customerRef}`,
              location: 'body' as const,
            },
          ]
        : [],
    );
    if (missing.length > 0) {
      throw new NotFoundError(
        'customer_not_found',
        `No customer ${inputs[0] === undefined || missing.length > 1 ? `for ${missing.length} records` : inputs[0].customerRef}`,
        { errors: missing },
      );
    }
    return inputs.map((input) =>
      typeof input.customerRef === 'string'
        ? { ...input, customerRef: ids.get(input.customerRef) ?? input.customerRef }
        : input,
    );
  }

  /** The customer id a usage read names (by id or externalRef), or 404. */
  private async customerId(auth: AuthContext, ref: string): Promise<string> {
    const customer = await findCustomer(this.pool, auth, ref);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${ref}`);
    return customer.id;
  }

  async record(auth: AuthContext, given: MeterEventInput): Promise<UsageRecord> {
    const meter = await this.activeMeter(auth, given.meterName ?? REQUESTS_METER);
    const [input = given] = await this.customerIds(auth, [given], () => '');
    const { record, errors } = this.build(auth, meter, input, '', this.clock.now());
    if (record === undefined || errors.length > 0) throw new ValidationError(errors);
    await this.publish([record]);
    await this.limits.reportUsage(auth, [record]);
    return record;
  }

  /**
   * All or nothing: one bad record refuses the whole request with every problem named by its
   * index, so a client never has to work out which half was kept.
   */
  async recordBulk(
    auth: AuthContext,
    body: { records?: MeterEventInput[] | undefined; events?: MeterEventInput[] | undefined },
  ) {
    if (body.records !== undefined && body.events !== undefined) {
      throw new ValidationError([
        { path: '/events', message: 'send records or events, not both', location: 'body' },
      ]);
    }
    const field = body.events === undefined ? 'records' : 'events';
    const inputs = body.records ?? body.events;
    if (inputs === undefined || inputs.length === 0) {
      throw new ValidationError([
        { path: `/${field}`, message: 'must contain at least one record', location: 'body' },
      ]);
    }
    if (inputs.length > MAX_BULK_RECORDS) {
      throw new DomainError(
        'too_many_records',
        `At most ${MAX_BULK_RECORDS} records per request; got ${inputs.length}`,
        {
          maxRecords: MAX_BULK_RECORDS,
        },
      );
    }
    const meters = new Map<string, Meter | DomainError>();
    for (const name of new Set(inputs.map((i) => i.meterName ?? REQUESTS_METER))) {
      try {
        meters.set(name, await this.activeMeter(auth, name));
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        meters.set(name, error);
      }
    }
    const now = this.clock.now();
    const records: UsageRecord[] = [];
    const errors: FieldProblem[] = [];
    inputs.forEach((input, index) => {
      const meter = meters.get(input.meterName ?? REQUESTS_METER);
      const path = `/${field}/${index}`;
      if (meter === undefined || meter instanceof DomainError) {
        errors.push({
          path: `${path}/meterName`,
          message: meter?.message ?? 'unknown meter',
          location: 'body',
        });
        return;
      }
      const built = this.build(auth, meter, input, path, now);
      errors.push(...built.errors);
      if (built.record !== undefined) records.push(built.record);
    });
    if (errors.length > 0) throw new ValidationError(errors);
    const resolved = await this.customerIds(auth, inputs, (index) => `/${field}/${index}`);
    for (const [index, record] of records.entries())
      record.customerRef = resolved[index]?.customerRef ?? record.customerRef;
    await this.publish(records);
    await this.limits.reportUsage(auth, records);
    return { accepted: records.length, records: records.map(accepted) };
  }

  /** The generic usage call: lands on the provider's requests meter, tagged with what happened. */
  async recordUsage(auth: AuthContext, input: UsageInput): Promise<UsageRecord> {
    const product = await findProduct(this.pool, auth, input.productRef);
    if (product === undefined) throw new NotFoundError('product_not_found', `No product ${input.productRef}`);
    // productId ties the units to the product's plan limit.
    const tags: Record<string, unknown> = {
      ...input.properties,
      productRef: product.reference,
      productId: product.id,
    };
    if (input.actionType !== undefined) tags.actionType = input.actionType;
    if (input.outcome !== undefined) tags.outcome = input.outcome;
    const record = await this.record(auth, {
      customerRef: input.customerRef,
      value: input.units,
      properties: tags,
      timestamp: input.timestamp,
      id: input.id,
      idempotencyKey: input.idempotencyKey,
    });
    await this.announce(auth, record, product.id);
    return record;
  }

  /**
   * usage.recorded, after the bus accepted the record. Its id derives from the record's, so a
   * client retrying with the same record id (after a crash between the two) announces it once.
   */
  private async announce(auth: AuthContext, record: UsageRecord, productId: string): Promise<void> {
    const customer = await findCustomer(this.pool, auth, record.customerRef);
    const purchase =
      customer === undefined ? undefined : await findAccessPurchase(this.pool, customer.id, productId);
    const digest = createHash('sha256')
      .update(`${auth.providerId}:${auth.environment}:${record.id}`)
      .digest('hex');
    const event = {
      ...auth,
      id: `evt_u${digest.slice(0, 25)}`,
      type: 'usage.recorded',
      object: {
        reference: record.id,
        customer: customer?.id ?? record.customerRef,
        product: productId,
        purchase: purchase?.id ?? null,
        quantity: record.value,
        meterName: record.meterName,
        recordedAt: unixSeconds(new Date(record.timestamp)),
      },
      at: this.clock.now(),
    };
    await inTransaction(this.pool, (tx) => writeEvent(tx, event));
  }

  private range(query: Range, defaultFrom: (to: Date) => Date) {
    const to = parseInstant(query.to, 'to', this.clock.now());
    const from = parseInstant(query.from, 'from', defaultFrom(to));
    if (from.getTime() >= to.getTime()) {
      throw new ValidationError([{ path: '/to', message: 'must be after from', location: 'querystring' }]);
    }
    return { from, to };
  }

  private async read<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch {
      // Never present stale or partial data as an answer.
      throw new UnavailableError(
        'usage_store_unavailable',
        'Usage data is unavailable right now; retry shortly',
      );
    }
  }

  async total(
    auth: AuthContext,
    meterRef: string,
    query: Range & {
      customerRef?: string | undefined;
      granularity?: Granularity | undefined;
      groupBy?: string | undefined;
    },
  ) {
    const meter = await this.meter(auth, meterRef);
    // Without granularity the default range is all time; with it, the last 30 days.
    const { from, to } = this.range(query, (end) =>
      query.granularity === undefined ? new Date(0) : new Date(end.getTime() - 30 * DAY_MS),
    );
    if (query.granularity !== undefined && countBuckets(from, to, query.granularity) > MAX_BUCKETS) {
      throw new ValidationError([
        {
          path: '/granularity',
          message: `the range holds more than ${MAX_BUCKETS} buckets; choose a coarser granularity`,
          location: 'querystring',
        },
      ]);
    }
    const customerRef =
      query.customerRef === undefined ? undefined : await this.customerId(auth, query.customerRef);
    // The requests meter's total is what can be billed: refusals count as records only.
    const aggregation = { ...meter, billableOnly: meter.name === REQUESTS_METER };
    const scope = { ...auth, meterRef: meter.id, customerRef, from, to, meter: aggregation };
    const { granularity, groupBy } = query;
    const [total, buckets, groups] = await this.read(() =>
      Promise.all([
        this.reader.total(scope),
        granularity === undefined ? undefined : this.reader.buckets({ ...scope, granularity }),
        groupBy === undefined ? undefined : this.reader.countByProperty({ ...scope, property: groupBy }),
      ]),
    );
    return {
      meterRef: meter.id,
      meterName: meter.name,
      aggregation: meter.aggregation,
      customerRef: customerRef ?? null,
      from: from.toISOString(),
      to: to.toISOString(),
      ...total,
      ...(buckets === undefined ? {} : { granularity, buckets }),
      ...(groups === undefined
        ? {}
        : {
            groupBy,
            groups: [...groups]
              .map(([value, records]) => ({ value, records }))
              .sort((a, b) => b.records - a.records || a.value.localeCompare(b.value)),
          }),
    };
  }

  /** Usage by customer, largest first: the top-customers view. */
  async byCustomer(auth: AuthContext, meterRef: string, query: Range & { limit: number }) {
    const meter = await this.meter(auth, meterRef);
    const { from, to } = this.range(query, (end) => new Date(end.getTime() - 30 * DAY_MS));
    const data = await this.read(() =>
      this.reader.byCustomer({
        ...auth,
        meterRef: meter.id,
        from,
        to,
        meter: { ...meter, billableOnly: meter.name === REQUESTS_METER },
        limit: query.limit,
      }),
    );
    return {
      meterRef: meter.id,
      meterName: meter.name,
      from: from.toISOString(),
      to: to.toISOString(),
      data,
    };
  }

  /** Records, customers and meters per UTC day across all of the provider's meters. */
  async daily(auth: AuthContext, query: Range & { customerRef?: string | undefined }) {
    const { from, to } = this.range(query, (end) => new Date(end.getTime() - 30 * DAY_MS));
    if (to.getTime() - from.getTime() > 366 * DAY_MS) {
      throw new ValidationError([
        { path: '/from', message: 'the range may span at most 366 days', location: 'querystring' },
      ]);
    }
    const customerRef =
      query.customerRef === undefined ? undefined : await this.customerId(auth, query.customerRef);
    const data = await this.read(() => this.reader.daily({ ...auth, from, to, customerRef }));
    return { from: from.toISOString(), to: to.toISOString(), data };
  }
}
