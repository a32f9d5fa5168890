import { type Static, Type } from '@sinclair/typebox';
import { Metadata, Nullable, nullable, page, stringEnum, Timestamp } from '../../http/schemas';

export const PLAN_TYPES = ['recurring', 'usage-based', 'one-time', 'hybrid'] as const;
export const BILLING_CYCLES = ['weekly', 'monthly', 'quarterly', 'yearly', 'custom'] as const;
export const BILLING_MODELS = ['pre-paid', 'post-paid'] as const;
export const TRACKING_METHODS = ['automatic', 'manual'] as const;
export const TRACKING_GRANULARITIES = ['hourly', 'daily', 'weekly', 'monthly'] as const;

const literals = <const T extends readonly string[]>(values: T, description?: string) =>
  stringEnum(values, description);

/** Minor units (cents); the ceiling keeps every sum of amounts a safe integer. */
const Money = (description: string) => Type.Integer({ minimum: 0, maximum: 99_999_999_999, description });
const Count = (description: string, max = 1_000_000_000_000) =>
  Type.Integer({ minimum: 0, maximum: max, description });

const UsageTracking = Type.Object(
  {
    method: literals(
      TRACKING_METHODS,
      'automatic: counted by the proxy; manual: reported through the usage API',
    ),
    granularity: literals(TRACKING_GRANULARITIES, 'Finest bucket shown in usage reports'),
  },
  { additionalProperties: false },
);

const Limits = Type.Record(Type.String(), Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]), {
  maxProperties: 50,
  propertyNames: { minLength: 1, maxLength: 64 },
  description: 'Named usage limits (for example {"requests": 1000}); null means unlimited',
});
const Features = Type.Record(
  Type.String(),
  Type.Union([Type.Boolean(), Type.Number(), Type.String({ maxLength: 500 })]),
  {
    maxProperties: 100,
    propertyNames: { minLength: 1, maxLength: 64 },
    description: 'Feature flags and values',
  },
);

/** Cents per unit as a decimal: a number (0.2) or a string ("0.2"), at most 12 decimal places. */
const DecimalCents = (description: string) =>
  Type.Union([Type.Number({ minimum: 0, maximum: 99_999_999_999 }), Type.String({ maxLength: 40 })], {
    description,
  });

const TierInput = Type.Object(
  {
    upTo: Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000_000_000 }), Type.Null()], {
      description: 'Last unit of the tier, inclusive; null for the last tier',
    }),
    unitAmount: DecimalCents('Cents per unit in this tier; decimals allowed (0.05)'),
    flatAmount: Type.Optional(Money('Whole cents charged once when the tier is used')),
  },
  { additionalProperties: false },
);

/** Fields a provider may change after creation; `type` and `currency` are fixed once sold. */
const mutable = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.String({ maxLength: 2000 }),
  billingCycle: literals(BILLING_CYCLES),
  billingIntervalDays: Type.Integer({
    minimum: 1,
    maximum: 3650,
    description: 'Period length in days; only with billingCycle "custom"',
  }),
  price: Money('Price in minor units (cents); per unit for usage-based and hybrid plans'),
  creditsPerUnit: Type.Integer({
    minimum: 1,
    maximum: 1_000_000,
    description: 'Credits debited per usage unit',
  }),
  billingModel: literals(BILLING_MODELS),
  freeUnits: Count('Units included each period before usage is charged'),
  limit: Count('Hard cap on usage per period; reaching it triggers the paywall'),
  basePrice: Money('Recurring base price of a hybrid plan, in minor units'),
  setupFee: Money('Charged once with the first payment, in minor units'),
  trialDays: Type.Integer({ minimum: 0, maximum: 730 }),
  rolloverUnusedUnits: Type.Boolean(),
  autoRenew: Type.Boolean(),
  status: Type.Union([Type.Literal('active'), Type.Literal('inactive')], {
    description: 'Archive with POST …/archive',
  }),
  maxActiveUsers: Type.Integer({ minimum: 1, maximum: 10_000_000 }),
  accessExpiryDays: Type.Integer({ minimum: 1, maximum: 36_500 }),
  default: Type.Boolean({ description: "The product's default plan; at most one per product" }),
  limits: Limits,
  metadata: Metadata,
  features: Features,
  usageTracking: UsageTracking,
  unitAmount: DecimalCents(
    'Usage-based and hybrid plans: cents per unit as a decimal (0.2 for a fifth of a cent), instead of price',
  ),
  tiers: Type.Array(TierInput, {
    maxItems: 20,
    description: 'Usage-based and hybrid plans: price tiers in increasing upTo, the last unbounded',
  }),
  tiersMode: literals(
    ['graduated', 'volume'] as const,
    'graduated: each tier prices its own units; volume: the tier of the total prices every unit',
  ),
  packageSize: Type.Integer({
    minimum: 1,
    maximum: 1_000_000_000,
    description:
      'Usage-based and hybrid plans: units per package; price (or unitAmount) is per package, started packages count',
  }),
  topUp: Type.Object(
    {
      credits: Type.Integer({ minimum: 1, maximum: 1_000_000_000_000, description: 'Credits the pack adds' }),
      amount: Type.Integer({ minimum: 1, maximum: 99_999_999, description: 'Price of the pack in cents' }),
    },
    {
      additionalProperties: false,
      description:
        'Plans paid from credits (usage-based, pre-paid): the pack the paywall offers when the credits run out',
    },
  ),
};

const optional = <T extends Record<string, import('@sinclair/typebox').TSchema>>(fields: T) =>
  Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, Type.Optional(v)])) as {
    [K in keyof T]: import('@sinclair/typebox').TOptional<T[K]>;
  };

export const PlanCreate = Type.Object(
  {
    ...optional(mutable),
    name: mutable.name,
    type: literals(PLAN_TYPES),
    currency: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z]{3}$',
        description: "ISO 4217 code; defaults to the merchant's default currency, else usd",
      }),
    ),
  },
  { additionalProperties: false },
);
export type PlanCreate = Static<typeof PlanCreate>;

export const PlanUpdate = Type.Object(
  {
    ...optional(mutable),
    description: nullable(mutable.description),
    billingIntervalDays: nullable(mutable.billingIntervalDays),
    limit: nullable(mutable.limit),
    maxActiveUsers: nullable(mutable.maxActiveUsers),
    accessExpiryDays: nullable(mutable.accessExpiryDays),
    usageTracking: nullable(UsageTracking),
    unitAmount: nullable(mutable.unitAmount),
    tiers: nullable(mutable.tiers),
    tiersMode: nullable(mutable.tiersMode),
    packageSize: nullable(mutable.packageSize),
    topUp: nullable(mutable.topUp),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type PlanUpdate = Static<typeof PlanUpdate>;

/** A unit price exactly as priced (Stripe's unit_amount_decimal): minor units, up to 12 decimals. */
const UnitAmountDecimal = Type.String({
  pattern: '^\\d+(\\.\\d{1,12})?$',
  description:
    'The unit price exactly, in minor units as a decimal string (up to 12 decimal places), as invoices price it',
});

export const Plan = Type.Object({
  reference: Type.String({ description: 'Plan reference (pln_…); also its id' }),
  id: Type.String(),
  productId: Type.String(),
  name: Type.String(),
  description: Nullable(Type.String()),
  type: literals(PLAN_TYPES),
  price: Type.Integer(),
  basePrice: Type.Integer(),
  setupFee: Type.Integer(),
  currency: Type.String(),
  currencySymbol: Type.String(),
  requiresPayment: Type.Boolean(),
  status: Type.Union([Type.Literal('active'), Type.Literal('inactive'), Type.Literal('archived')]),
  isActive: Type.Boolean(),
  billingCycle: Nullable(literals(BILLING_CYCLES)),
  billingIntervalDays: Nullable(Type.Integer()),
  billingModel: literals(BILLING_MODELS),
  creditsPerUnit: Type.Integer(),
  freeUnits: Type.Integer(),
  limit: Nullable(Type.Integer()),
  meterRef: Nullable(Type.String()),
  measures: Nullable(Type.String()),
  rolloverUnusedUnits: Type.Boolean(),
  autoRenew: Type.Boolean(),
  trialDays: Type.Integer(),
  maxActiveUsers: Nullable(Type.Integer()),
  accessExpiryDays: Nullable(Type.Integer()),
  default: Type.Boolean(),
  limits: Type.Record(Type.String(), Nullable(Type.Integer())),
  features: Type.Record(Type.String(), Type.Union([Type.Boolean(), Type.Number(), Type.String()])),
  metadata: Type.Record(Type.String(), Type.String()),
  usageTracking: Nullable(UsageTracking),
  unitAmount: Nullable(
    Type.Number({
      description:
        'Minor units (cents) per unit, decimal; a JSON number, so past about 15 significant digits the nearest double: read unitAmountDecimal',
    }),
  ),
  unitAmountDecimal: Nullable(UnitAmountDecimal),
  tiers: Nullable(
    Type.Array(
      Type.Object({
        upTo: Nullable(Type.Integer()),
        unitAmount: Type.Number(),
        unitAmountDecimal: UnitAmountDecimal,
        flatAmount: Type.Integer(),
      }),
    ),
  ),
  tiersMode: Nullable(literals(['graduated', 'volume'] as const)),
  packageSize: Nullable(Type.Integer()),
  topUp: Nullable(Type.Object({ credits: Type.Integer(), amount: Type.Integer() })),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type Plan = Static<typeof Plan>;

export const PlanPage = page(Plan);
export const PlanParams = Type.Object({ planRef: Type.String({ minLength: 1, maxLength: 100 }) });
