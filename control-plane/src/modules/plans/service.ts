import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import { findProduct } from '../products/repository';
import { getProvider } from '../providers/repository';
import {
  clearOtherDefaults,
  findPlan,
  insertPlan,
  listPlans,
  type PlanRow,
  settingsOf,
  updatePlan,
} from './repository';
import {
  currencySymbol,
  isMetered,
  normaliseDecimal,
  type PlanSettings,
  planProblems,
  requiresPayment,
} from './rules';
import type { Plan, PlanCreate, PlanUpdate } from './schemas';

export function toPlan(row: PlanRow): Plan {
  const s = settingsOf(row);
  return {
    reference: row.id,
    id: row.id,
    productId: row.product_id,
    name: s.name,
    description: s.description,
    type: s.type,
    price: s.price,
    basePrice: s.basePrice,
    setupFee: s.setupFee,
    currency: s.currency,
    currencySymbol: currencySymbol(s.currency),
    requiresPayment: requiresPayment(s),
    status: s.status,
    isActive: s.status === 'active',
    billingCycle: s.billingCycle,
    billingIntervalDays: s.billingIntervalDays,
    billingModel: s.billingModel,
    creditsPerUnit: s.creditsPerUnit,
    freeUnits: s.freeUnits,
    limit: s.limit,
    meterRef: row.meter_id,
    measures: row.meter_name,
    rolloverUnusedUnits: s.rolloverUnusedUnits,
    autoRenew: s.autoRenew,
    trialDays: s.trialDays,
    maxActiveUsers: s.maxActiveUsers,
    accessExpiryDays: s.accessExpiryDays,
    default: s.isDefault,
    limits: s.limits,
    features: s.features,
    metadata: s.metadata,
    usageTracking: s.usageTracking,
    unitAmount: s.unitAmount === null ? null : Number(s.unitAmount),
    unitAmountDecimal: s.unitAmount,
    tiers:
      s.tiers === null
        ? null
        : s.tiers.map((t) => ({
            upTo: t.upTo,
            unitAmount: Number(t.unitAmount),
            unitAmountDecimal: t.unitAmount,
            flatAmount: t.flatAmount,
          })),
    tiersMode: s.tiersMode,
    packageSize: s.packageSize,
    topUp: s.topUp,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** The pricing fields of a request as settings: decimals in their normal form ("0.20" → "0.2"). */
function pricingFields(input: {
  unitAmount?: number | string | null | undefined;
  tiers?:
    | Array<{ upTo: number | null; unitAmount: number | string; flatAmount?: number | undefined }>
    | null
    | undefined;
  tiersMode?: 'graduated' | 'volume' | null | undefined;
  packageSize?: number | null | undefined;
}): Partial<Pick<PlanSettings, 'unitAmount' | 'tiers' | 'tiersMode' | 'packageSize'>> {
  const fields: Partial<Pick<PlanSettings, 'unitAmount' | 'tiers' | 'tiersMode' | 'packageSize'>> = {};
  if (input.unitAmount !== undefined)
    fields.unitAmount = input.unitAmount === null ? null : normaliseDecimal(input.unitAmount);
  if (input.tiers !== undefined)
    fields.tiers =
      input.tiers === null
        ? null
        : input.tiers.map((t) => ({
            upTo: t.upTo,
            unitAmount: normaliseDecimal(t.unitAmount),
            flatAmount: t.flatAmount ?? 0,
          }));
  if (input.tiersMode !== undefined) fields.tiersMode = input.tiersMode;
  if (input.packageSize !== undefined) fields.packageSize = input.packageSize;
  return fields;
}

/** Payload of `plan.*` events (spec 6.5). */
const eventObject = (row: PlanRow) => ({
  id: row.id,
  reference: row.id,
  name: row.name,
  status: row.status,
  kind: row.type,
  price: row.price,
  currency: row.currency,
  requiresPayment: requiresPayment(settingsOf(row)),
  created: unixSeconds(row.created_at),
});

export class PlanService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  async create(auth: AuthContext, productRef: string, input: PlanCreate): Promise<Plan> {
    const at = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const product = await findProduct(tx, auth, productRef, { forUpdate: true });
      if (product === undefined) throw new NotFoundError('product_not_found', `No product ${productRef}`);
      if (product.status === 'archived')
        throw new ConflictError('product_archived', `Product ${product.id} is archived`);
      const provider = await getProvider(tx, auth.providerId);
      const type = input.type;
      const limit = input.limit ?? null;
      const metered = isMetered({ type, limit });
      const settings: PlanSettings = {
        name: input.name,
        description: input.description ?? null,
        type,
        price: input.price ?? 0,
        basePrice: input.basePrice ?? 0,
        setupFee: input.setupFee ?? 0,
        currency: (input.currency ?? provider?.defaultCurrency ?? 'usd').toLowerCase(),
        billingCycle: input.billingCycle ?? (type === 'one-time' ? null : 'monthly'),
        billingIntervalDays: input.billingIntervalDays ?? null,
        billingModel: input.billingModel ?? (type === 'usage-based' ? 'post-paid' : 'pre-paid'),
        creditsPerUnit: input.creditsPerUnit ?? 1,
        freeUnits: input.freeUnits ?? 0,
        limit,
        trialDays: input.trialDays ?? 0,
        rolloverUnusedUnits: input.rolloverUnusedUnits ?? false,
        autoRenew: input.autoRenew ?? type !== 'one-time',
        status: input.status ?? 'active',
        maxActiveUsers: input.maxActiveUsers ?? null,
        accessExpiryDays: input.accessExpiryDays ?? null,
        isDefault: input.default ?? false,
        limits: input.limits ?? {},
        features: input.features ?? {},
        metadata: input.metadata ?? {},
        usageTracking:
          input.usageTracking ?? (metered ? { method: 'automatic', granularity: 'hourly' } : null),
        unitAmount: null,
        tiers: null,
        tiersMode: null,
        packageSize: null,
        topUp: input.topUp ?? null,
        ...pricingFields(input),
      };
      const problems = planProblems(settings);
      if (problems.length > 0) throw new ValidationError(problems);

      const id = newId(ID.plan);
      const meterId = metered ? await this.requestsMeterId(tx, auth) : null;
      // Before the insert: the partial unique index allows one default plan per product.
      if (settings.isDefault) await clearOtherDefaults(tx, product.id, id);
      await insertPlan(tx, { id, tenant: auth, productId: product.id, meterId, settings, at });
      const row = await this.mustFind(tx, auth, id);
      await writeEvent(tx, { ...auth, type: 'plan.created', object: eventObject(row), at });
      return toPlan(row);
    });
  }

  async get(auth: AuthContext, ref: string): Promise<Plan> {
    return toPlan(await this.mustFind(this.pool, auth, ref));
  }

  async listForProduct(
    auth: AuthContext,
    productRef: string,
    query: { limit: number; cursor?: string | undefined; status?: string | undefined },
  ) {
    const product = await findProduct(this.pool, auth, productRef);
    if (product === undefined) throw new NotFoundError('product_not_found', `No product ${productRef}`);
    const rows = await listPlans(this.pool, product.id, {
      after: decodeCursor(query.cursor),
      limit: query.limit,
      status: query.status,
    });
    return toPage(rows, query.limit, toPlan);
  }

  async update(auth: AuthContext, ref: string, patch: PlanUpdate): Promise<Plan> {
    return this.change(auth, ref, (current) => {
      if (current.status === 'archived') throw new ConflictError('plan_archived', `Plan ${ref} is archived`);
      const { default: isDefault, unitAmount, tiers, tiersMode, packageSize, ...rest } = patch;
      const merged = {
        ...settingsOf(current),
        ...rest,
        ...pricingFields({ unitAmount, tiers, tiersMode, packageSize }),
      } as PlanSettings;
      if (isDefault !== undefined) merged.isDefault = isDefault;
      return merged;
    });
  }

  /** Idempotent. An archived plan is off sale for good; existing purchases keep it. */
  async archive(auth: AuthContext, ref: string): Promise<Plan> {
    return this.change(auth, ref, (current) => ({
      ...settingsOf(current),
      status: 'archived',
      isDefault: false,
    }));
  }

  private async change(
    auth: AuthContext,
    ref: string,
    next: (current: PlanRow) => PlanSettings,
  ): Promise<Plan> {
    const at = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const current = await findPlan(tx, auth, ref, { forUpdate: true });
      if (current === undefined) throw new NotFoundError('plan_not_found', `No plan ${ref}`);
      if (current.status === 'archived' && next(current).status === 'archived') return toPlan(current);
      const settings = next(current);
      const problems = planProblems(settings);
      if (problems.length > 0) throw new ValidationError(problems);
      const meterId = isMetered(settings)
        ? (current.meter_id ?? (await this.requestsMeterId(tx, auth)))
        : null;
      if (settings.isDefault) await clearOtherDefaults(tx, current.product_id, current.id);
      await updatePlan(tx, { id: current.id, meterId, settings, at });
      const row = await this.mustFind(tx, auth, current.id);
      const before = eventObject(current);
      const after = eventObject(row);
      const previous = Object.fromEntries(
        Object.entries(before).filter(([key, value]) => value !== after[key as keyof typeof after]),
      );
      const archived = current.status !== 'archived' && row.status === 'archived';
      await writeEvent(tx, {
        ...auth,
        type: archived ? 'plan.archived' : 'plan.updated',
        object: after,
        previousAttributes: previous,
        at,
      });
      return toPlan(row);
    });
  }

  private async requestsMeterId(tx: PoolClient, auth: AuthContext): Promise<string> {
    const meter = await findMeter(tx, auth.providerId, auth.environment, REQUESTS_METER);
    if (meter === undefined) throw new Error(`provider ${auth.providerId} has no requests meter`);
    return meter.id;
  }

  private async mustFind(db: Pool | PoolClient, auth: AuthContext, ref: string): Promise<PlanRow> {
    const row = await findPlan(db, auth, ref);
    if (row === undefined) throw new NotFoundError('plan_not_found', `No plan ${ref}`);
    return row;
  }
}
