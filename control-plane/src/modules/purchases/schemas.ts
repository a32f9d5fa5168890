import { Type } from '@sinclair/typebox';
import { Nullable, stringEnum, Timestamp } from '../../http/schemas';
import { PurchaseDiscount } from '../coupons/schemas';
import { CancellationDetailsSchema, CancellationInput } from './cancellation';
import { PURCHASE_STATUSES } from './state-machine';

export const Purchase = Type.Object({
  reference: Type.String({ description: 'Purchase reference (pur_…); also its id' }),
  id: Type.String(),
  status: stringEnum(PURCHASE_STATUSES),
  customerRef: Type.String(),
  productId: Type.String(),
  planRef: Type.String(),
  amount: Type.Integer({ description: 'Price per period (or once), minor units' }),
  currency: Type.String(),
  billingCycle: Nullable(Type.String()),
  isRecurring: Type.Boolean(),
  autoRenew: Type.Boolean(),
  cancelAtPeriodEnd: Type.Boolean(),
  periodStart: Timestamp,
  periodEnd: Nullable(Timestamp),
  trialEnd: Nullable(Timestamp),
  endedAt: Nullable(Timestamp),
  discount: Nullable(PurchaseDiscount),
  cancellationDetails: CancellationDetailsSchema,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const PurchasePage = Type.Object({ data: Type.Array(Purchase), nextCursor: Nullable(Type.String()) });
export const PurchaseParams = Type.Object({ ref: Type.String({ minLength: 1, maxLength: 100 }) });
export const PurchaseListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
    customerRef: Type.Optional(Type.String({ maxLength: 255 })),
    status: Type.Optional(stringEnum(PURCHASE_STATUSES)),
  },
  { additionalProperties: false },
);
/** A preview's moment, sent back when confirming so the change prorates exactly as shown. */
const ProrationDate = Type.String({
  format: 'date-time',
  maxLength: 40,
  description:
    "The preview's prorationDate (from the last 15 minutes): the change credits unused time from it, so it charges and refunds exactly what the preview showed",
});

export const CancelBody = Type.Object(
  {
    atPeriodEnd: Type.Optional(
      Type.Boolean({ description: 'Keep access until the period ends (recurring plans); default false' }),
    ),
    prorate: Type.Optional(
      Type.Boolean({
        description:
          'Cancelling now: refund the unused time of a paid period to the card that paid it (see the cancellation preview); default false',
      }),
    ),
    prorationDate: Type.Optional(ProrationDate),
    cancellationDetails: Type.Optional(CancellationInput),
  },
  { additionalProperties: false },
);

export const ActivateBody = Type.Object(
  {
    customerRef: Type.String({
      minLength: 1,
      maxLength: 255,
      description: 'Customer reference or externalRef',
    }),
    planRef: Type.String({ minLength: 1, maxLength: 100 }),
    productRef: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: "Must be the plan's product when given" }),
    ),
    prorationDate: Type.Optional(ProrationDate),
    coupon: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description:
          'A coupon (cpn_… or its code) to redeem on the new purchase; without, a switch keeps the old purchase’s discount',
      }),
    ),
  },
  { additionalProperties: false },
);

/** The body of an activation's preview: the activation's, without a proration date. */
export const ActivatePreviewBody = Type.Omit(ActivateBody, ['prorationDate'], {
  additionalProperties: false,
});

/** What a plan change would charge and refund, shown before the customer confirms it. */
export const ChangePreview = Type.Object({
  currency: Type.String(),
  prorationDate: Type.String({
    format: 'date-time',
    description: 'Send it back with the change (within 15 minutes) to be charged exactly this',
  }),
  fromPlan: Nullable(Type.String({ description: 'The plan in force now, if any' })),
  toPlan: Nullable(Type.String({ description: 'The plan switched to; null for a cancellation' })),
  credit: Type.Integer({ description: "Cents of the current plan's unused paid time, half to even" }),
  lines: Type.Array(
    Type.Object({
      kind: Type.String({
        description: 'base, setup_fee, discount (negative), proration (negative) or proration_refund',
      }),
      description: Type.String(),
      amount: Type.Integer({ description: 'Minor units' }),
    }),
    { description: "The new plan's first invoice, or the refund of a cancellation" },
  ),
  dueNow: Type.Integer({ description: 'Charged to the default card now (the first invoice’s total)' }),
  refund: Type.Integer({ description: 'Refunded to the card that paid the current period' }),
  checkoutRequired: Type.Boolean({
    description: 'No card on file: the change goes through hosted checkout, which prorates when paid',
  }),
});

/** A cancelled purchase, with the refund of its unused time when `prorate` asked for it. */
export const CancelResult = Type.Composite([
  Purchase,
  Type.Object({
    refund: Type.Optional(Type.Object({ id: Type.String({ description: 're_…' }), amount: Type.Integer() })),
  }),
]);

/** What an activation did (`status`), with the purchase and, when payment is due, where to pay. */
export const ActivationResult = Type.Object({
  status: stringEnum([
    'activated',
    'already_active',
    'payment_required',
    'topup_required',
    'invalid',
  ] as const),
  message: Type.String(),
  purchaseRef: Type.Optional(Type.String()),
  checkoutSessionId: Type.Optional(Type.String()),
  checkoutUrl: Type.Optional(Type.String()),
  proration: Type.Optional(
    Type.Object(
      {
        credit: Type.Integer({
          description: "Cents credited for the old plan's unused paid time, half to even",
        }),
        appliedToInvoice: Type.Integer({
          description: "Of the credit, what the new plan's first invoice used",
        }),
        refunded: Type.Integer({
          description: 'Of the credit, what went back to the card that paid the old period',
        }),
        invoiceId: Nullable(Type.String({ description: "The new plan's first invoice (inv_…)" })),
        refundId: Nullable(Type.String({ description: 'The refund of the rest (re_…)' })),
      },
      { description: 'Present when a switch credited unused time of a paid period' },
    ),
  ),
  creditBalance: Type.Integer(),
  creditsPerUnit: Type.Integer(),
  currency: Type.String(),
});
