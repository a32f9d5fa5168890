import { formatDecimal } from '@mcp-meter/contracts/pricing';
import { prepared, type Queryable } from '../../db/pool';
import type { Tenant } from '../products/repository';
import { decimalOf, type PlanSettings } from './rules';

export interface PlanRow {
  id: string;
  provider_id: string;
  environment: 'sandbox' | 'live';
  product_id: string;
  meter_id: string | null;
  meter_name: string | null;
  name: string;
  description: string | null;
  type: PlanSettings['type'];
  price: number;
  currency: string;
  billing_cycle: PlanSettings['billingCycle'];
  billing_interval_days: number | null;
  billing_model: PlanSettings['billingModel'];
  credits_per_unit: number;
  free_units: number;
  usage_limit: number | null;
  base_price: number;
  setup_fee: number;
  trial_days: number;
  rollover_unused_units: boolean;
  auto_renew: boolean;
  status: PlanSettings['status'];
  max_active_users: number | null;
  access_expiry_days: number | null;
  is_default: boolean;
  limits: PlanSettings['limits'];
  metadata: PlanSettings['metadata'];
  features: PlanSettings['features'];
  usage_tracking: PlanSettings['usageTracking'];
  /** numeric: pg answers it as a string, exact. */
  unit_amount: string | null;
  tiers: PlanSettings['tiers'];
  tiers_mode: PlanSettings['tiersMode'];
  package_size: string | number | null;
  topup_credits: string | number | null;
  topup_amount: number | null;
  created_at: Date;
  updated_at: Date;
}

export const settingsOf = (row: PlanRow): PlanSettings => ({
  name: row.name,
  description: row.description,
  type: row.type,
  price: row.price,
  basePrice: row.base_price,
  setupFee: row.setup_fee,
  currency: row.currency,
  billingCycle: row.billing_cycle,
  billingIntervalDays: row.billing_interval_days,
  billingModel: row.billing_model,
  creditsPerUnit: row.credits_per_unit,
  freeUnits: row.free_units,
  limit: row.usage_limit,
  trialDays: row.trial_days,
  rolloverUnusedUnits: row.rollover_unused_units,
  autoRenew: row.auto_renew,
  status: row.status,
  maxActiveUsers: row.max_active_users,
  accessExpiryDays: row.access_expiry_days,
  isDefault: row.is_default,
  limits: row.limits,
  features: row.features,
  metadata: row.metadata,
  usageTracking: row.usage_tracking,
  unitAmount: row.unit_amount === null ? null : formatDecimal(decimalOf(row.unit_amount)),
  tiers: row.tiers,
  tiersMode: row.tiers_mode,
  packageSize: row.package_size === null ? null : Number(row.package_size),
  topUp:
    row.topup_credits === null || row.topup_amount === null
      ? null
      : { credits: Number(row.topup_credits), amount: row.topup_amount },
});

const SELECT = `SELECT p.*, m.name AS meter_name FROM plans p LEFT JOIN meters m ON m.id = p.meter_id`;

/** Column order shared by insert and update; values come from the settings, never the request. */
const columns = (s: PlanSettings, meterId: string | null) => [
  meterId,
  s.name,
  s.description,
  s.type,
  s.price,
  s.currency,
  s.billingCycle,
  s.billingIntervalDays,
  s.billingModel,
  s.creditsPerUnit,
  s.freeUnits,
  s.limit,
  s.basePrice,
  s.setupFee,
  s.trialDays,
  s.rolloverUnusedUnits,
  s.autoRenew,
  s.status,
  s.maxActiveUsers,
  s.accessExpiryDays,
  s.isDefault,
  s.limits,
  s.metadata,
  s.features,
  s.usageTracking,
  s.unitAmount,
  s.tiers === null ? null : JSON.stringify(s.tiers),
  s.tiersMode,
  s.packageSize,
  s.topUp?.credits ?? null,
  s.topUp?.amount ?? null,
];

export async function insertPlan(
  db: Queryable,
  plan: {
    id: string;
    tenant: Tenant;
    productId: string;
    meterId: string | null;
    settings: PlanSettings;
    at: Date;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO plans (id, provider_id, environment, product_id, created_at, updated_at,
       meter_id, name, description, type, price, currency, billing_cycle, billing_interval_days, billing_model,
       credits_per_unit, free_units, usage_limit, base_price, setup_fee, trial_days, rollover_unused_units,
       auto_renew, status, max_active_users, access_expiry_days, is_default, limits, metadata, features, usage_tracking,
       unit_amount, tiers, tiers_mode, package_size, topup_credits, topup_amount)
     VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
             $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36)`,
    [
      plan.id,
      plan.tenant.providerId,
      plan.tenant.environment,
      plan.productId,
      plan.at,
      ...columns(plan.settings, plan.meterId),
    ],
  );
}

export async function updatePlan(
  db: Queryable,
  plan: { id: string; meterId: string | null; settings: PlanSettings; at: Date },
): Promise<void> {
  await db.query(
    `UPDATE plans SET updated_at = $2,
       meter_id = $3, name = $4, description = $5, type = $6, price = $7, currency = $8, billing_cycle = $9,
       billing_interval_days = $10, billing_model = $11, credits_per_unit = $12, free_units = $13, usage_limit = $14,
       base_price = $15, setup_fee = $16, trial_days = $17, rollover_unused_units = $18, auto_renew = $19, status = $20,
       max_active_users = $21, access_expiry_days = $22, is_default = $23, limits = $24, metadata = $25, features = $26,
       usage_tracking = $27, unit_amount = $28, tiers = $29, tiers_mode = $30, package_size = $31,
       topup_credits = $32, topup_amount = $33
     WHERE id = $1`,
    [plan.id, plan.at, ...columns(plan.settings, plan.meterId)],
  );
}

/** Leaves `keepId` as the product's only default plan. */
export async function clearOtherDefaults(db: Queryable, productId: string, keepId: string): Promise<void> {
  await db.query('UPDATE plans SET is_default = false WHERE product_id = $1 AND id <> $2 AND is_default', [
    productId,
    keepId,
  ]);
}

export async function findPlan(
  db: Queryable,
  tenant: Tenant,
  ref: string,
  options: { forUpdate?: boolean } = {},
): Promise<PlanRow | undefined> {
  const forUpdate = options.forUpdate === true;
  const text = `${SELECT} WHERE p.provider_id = $1 AND p.environment = $2 AND p.id = $3 ${forUpdate ? 'FOR NO KEY UPDATE OF p' : ''}`;
  const values = [tenant.providerId, tenant.environment, ref];
  const { rows } = await db.query<PlanRow>(
    forUpdate ? { text, values } : prepared('plan_by_id', text, values),
  );
  return rows[0];
}

export async function listPlans(
  db: Queryable,
  productId: string,
  options: { after?: string | undefined; limit: number; status?: string | undefined },
): Promise<PlanRow[]> {
  const { rows } = await db.query<PlanRow>(
    `${SELECT} WHERE p.product_id = $1 AND ($2::text IS NULL OR p.id > $2) AND ($3::text IS NULL OR p.status = $3)
     ORDER BY p.id LIMIT $4`,
    [productId, options.after ?? null, options.status ?? null, options.limit + 1],
  );
  return rows;
}

/** The provider's products whose default plan is on sale (they limit customers without a purchase). */
export async function productsWithDefaultPlan(
  db: Queryable,
  tenant: { providerId: string; environment: string },
) {
  const { rows } = await db.query<{ product_id: string }>(
    `SELECT DISTINCT p.product_id FROM plans p JOIN products r ON r.id = p.product_id
      WHERE r.provider_id = $1 AND r.environment = $2 AND p.is_default AND p.status = 'active'`,
    [tenant.providerId, tenant.environment],
  );
  return rows.map((r) => r.product_id);
}

/** The product's default plan on sale, whatever its price: the plan of customers without a purchase. */
export async function findDefaultPlanId(db: Queryable, productId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(
    prepared(
      'default_plan',
      `SELECT id FROM plans WHERE product_id = $1 AND is_default AND status = 'active'`,
      [productId],
    ),
  );
  return rows[0]?.id;
}

/** The product's plans on sale, cheapest first: what a paywall chooses from. */
export async function plansOnSale(db: Queryable, productId: string): Promise<PlanRow[]> {
  const { rows } = await db.query<PlanRow>(
    `${SELECT} WHERE p.product_id = $1 AND p.status = 'active' ORDER BY p.price, p.id`,
    [productId],
  );
  return rows;
}
