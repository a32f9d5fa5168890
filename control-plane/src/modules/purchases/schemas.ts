import { Type } from '@sinclair/typebox';
import { Nullable, stringEnum, Timestamp } from '../../http/schemas';
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
export const CancelBody = Type.Object(
  {
    atPeriodEnd: Type.Optional(
      Type.Boolean({ description: 'Keep access until the period ends (recurring plans); default false' }),
    ),
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
  },
  { additionalProperties: false },
);

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
