import { Type } from '@sinclair/typebox';
import { ListQuery, Metadata, Nullable, page, stringEnum, Timestamp } from '../../http/schemas';

export const COUPON_DURATIONS = ['once', 'repeating', 'forever'] as const;
export const COUPON_STATUSES = ['active', 'archived'] as const;

const Name = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'Shown to the customer on checkout, invoices and the portal',
});

export const CouponCreate = Type.Object(
  {
    name: Name,
    code: Type.Optional(
      Type.String({
        minLength: 3,
        maxLength: 40,
        pattern: '^[A-Za-z0-9][A-Za-z0-9_-]*$',
        description:
          'What a customer types at checkout (letters, digits, - and _), matched without regard to case; one active coupon per code. Without it the coupon is redeemed by id only',
      }),
    ),
    percentOff: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        maximum: 100,
        // Two decimals at most, checked on the hundredths (a float multipleOf refuses 19.99).
        description: 'Percent off each charge (up to two decimals); or amountOff',
      }),
    ),
    amountOff: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100_000_000_000,
        description: 'Minor units off each invoice it applies to; needs currency',
      }),
    ),
    currency: Type.Optional(
      Type.String({ pattern: '^[A-Za-z]{3}$', description: 'ISO 4217, for amountOff: plans in it only' }),
    ),
    duration: stringEnum(
      COUPON_DURATIONS,
      'once: the first invoice; repeating: invoices issued in the durationInMonths after redemption; forever',
    ),
    durationInMonths: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 120, description: 'For repeating, and only for it' }),
    ),
    maxRedemptions: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1_000_000_000,
        description: 'Purchases that may redeem it, in all',
      }),
    ),
    redeemBy: Type.Optional(
      Type.String({ format: 'date-time', description: 'Last moment it can be redeemed; in the future' }),
    ),
    productIds: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
        maxItems: 50,
        uniqueItems: true,
        description: 'Products (prd_…) whose plans it applies to; all when absent or empty',
      }),
    ),
    firstTimeOnly: Type.Optional(
      Type.Boolean({ description: 'Only customers who have never paid may redeem it (default false)' }),
    ),
    minimumAmount: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100_000_000_000,
        description:
          'Minor units a purchase must come to for the coupon to be redeemed on it: its price for a period plus its setup fee, before any discount; needs minimumAmountCurrency',
      }),
    ),
    minimumAmountCurrency: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z]{3}$',
        description: 'ISO 4217, for minimumAmount: purchases in another currency cannot redeem it',
      }),
    ),
    customerRef: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description: 'The one customer (id or externalRef) who may redeem it; any when absent',
      }),
    ),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);

export const CouponUpdate = Type.Object(
  { name: Type.Optional(Name), metadata: Type.Optional(Metadata) },
  { additionalProperties: false },
);

/** What a coupon takes off and for how long: the coupon's terms, and a discount's copy of them. */
const Terms = {
  name: Type.String(),
  code: Nullable(Type.String()),
  percentOff: Nullable(Type.Number()),
  amountOff: Nullable(Type.Integer()),
  currency: Nullable(Type.String()),
  duration: stringEnum(COUPON_DURATIONS),
  durationInMonths: Nullable(Type.Integer()),
};

export const Coupon = Type.Object({
  id: Type.String({ description: 'cpn_…' }),
  ...Terms,
  maxRedemptions: Nullable(Type.Integer()),
  timesRedeemed: Type.Integer(),
  redeemBy: Nullable(Timestamp),
  productIds: Type.Array(Type.String()),
  firstTimeOnly: Type.Boolean(),
  minimumAmount: Nullable(Type.Integer()),
  minimumAmountCurrency: Nullable(Type.String()),
  customerRef: Nullable(
    Type.String({ description: 'The one customer (cus_…) who may redeem it; null for any' }),
  ),
  metadata: Type.Record(Type.String(), Type.String()),
  status: stringEnum(COUPON_STATUSES),
  valid: Type.Boolean({
    description: 'Whether it can be redeemed now: active, before redeemBy, not used up',
  }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const CouponPage = page(Coupon);

export const CouponListQuery = Type.Composite(
  [
    ListQuery,
    Type.Object({
      status: Type.Optional(stringEnum(COUPON_STATUSES)),
      code: Type.Optional(
        Type.String({ minLength: 1, maxLength: 40, description: 'The coupon of this code' }),
      ),
    }),
  ],
  { additionalProperties: false },
);

export const CouponParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });

/** A purchase's discount, as the purchase shows it. */
export const PurchaseDiscount = Type.Object(
  {
    coupon: Type.String({ description: 'cpn_…' }),
    ...Terms,
    start: Timestamp,
    end: Nullable(Timestamp),
  },
  {
    description:
      'The coupon the purchase redeemed: it takes money off invoices issued before `end` (null: until a `once` discount’s first invoice, or forever)',
  },
);

export const DiscountBody = Type.Object(
  {
    coupon: Type.String({ minLength: 1, maxLength: 100, description: 'A coupon id (cpn_…) or its code' }),
  },
  { additionalProperties: false },
);
