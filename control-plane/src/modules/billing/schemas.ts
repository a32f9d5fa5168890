import { type Static, Type } from '@sinclair/typebox';
import { Address, TaxId } from '../../billing-details';
import { Nullable, stringEnum, Timestamp } from '../../http/schemas';
import { LINE_KINDS } from './repository';

export const InvoiceLine = Type.Object({
  description: Type.String(),
  quantity: Type.Integer(),
  unitAmount: Type.String({
    description: 'Cents per unit as an exact decimal ("0.2"); for a flat fee, the fee',
  }),
  amount: Type.Integer({ description: 'Whole cents, rounded once, half to even' }),
});

export const UpcomingInvoice = Type.Object({
  purchaseRef: Type.String(),
  customerRef: Type.String(),
  planRef: Type.String(),
  currency: Type.String(),
  periodStart: Timestamp,
  periodEnd: Nullable(Timestamp),
  asOf: Timestamp,
  usage: Type.Object({
    units: Type.Integer({ description: 'Counted on the requests meter since the period started' }),
    freeUnits: Type.Integer(),
    billableUnits: Type.Integer(),
  }),
  lines: Type.Array(InvoiceLine),
  total: Type.Integer({ description: 'Whole cents: the sum of the lines (the usage so far)' }),
  renewal: Nullable(
    Type.Object(
      {
        chargedAt: Timestamp,
        periodStart: Timestamp,
        periodEnd: Timestamp,
        base: Type.Integer({ description: "The next period's price, charged in advance" }),
        setupFee: Type.Integer({ description: 'A setup fee deferred by a trial, charged with it' }),
      },
      {
        description:
          'What the invoice at the end of this period (or trial) charges beside the usage; null when the purchase does not renew with a charge (cancelling at period end, one-time, paid from credits, free)',
      },
    ),
  ),
  discount: Type.Integer({
    description:
      'What the purchase’s discount takes off that invoice (0 or negative), if it still applies when the invoice is issued',
  }),
  amountDue: Type.Integer({
    description:
      'The whole next invoice as of now: the usage so far plus the renewal’s base and setup fee, less the discount',
  }),
});
export type UpcomingInvoice = Static<typeof UpcomingInvoice>;

export const UpcomingQuery = Type.Object(
  { purchaseRef: Type.String({ minLength: 1, maxLength: 100 }) },
  { additionalProperties: false },
);

export const INVOICE_STATUSES = ['draft', 'open', 'paid', 'uncollectible', 'void'] as const;

export const Invoice = Type.Object({
  id: Type.String({ description: 'Invoice id (inv_…)' }),
  status: stringEnum(
    INVOICE_STATUSES,
    'draft while its usage period waits out the lateness allowance (recounted each pass, no payment, no customer copy); open until paid; uncollectible when dunning gives up; void when the provider voided it unpaid',
  ),
  customerRef: Type.String(),
  customerName: Nullable(
    Type.String({
      description:
        "The customer's name, email, address and tax ids as they stood when the invoice was finalized (a draft's follow the customer); later changes leave an issued invoice as it was",
    }),
  ),
  customerEmail: Nullable(Type.String()),
  customerAddress: Nullable(Address),
  customerTaxIds: Type.Array(TaxId),
  issuer: Type.Object(
    {
      legalName: Type.String(),
      companyNumber: Nullable(Type.String()),
      address: Nullable(Address),
      taxId: Nullable(Type.String()),
      vatNumber: Nullable(Type.String()),
    },
    { description: 'The provider as the invoice names it, as it stood when the invoice was finalized' },
  ),
  purchaseRef: Type.String(),
  productId: Type.String(),
  planRef: Type.String(),
  billingReason: stringEnum(['first_payment', 'renewal', 'trial_conversion', 'final_usage'] as const),
  currency: Type.String(),
  usage: Nullable(
    Type.Object({
      periodStart: Timestamp,
      periodEnd: Timestamp,
      units: Type.Integer({ description: 'Counted on the requests meter in [periodStart, periodEnd)' }),
      freeUnits: Type.Integer({ description: "The plan's free units plus any carried over" }),
      billableUnits: Type.Integer(),
    }),
  ),
  lines: Type.Array(
    Type.Object({
      kind: stringEnum(LINE_KINDS),
      description: Type.String(),
      quantity: Type.Integer(),
      unitAmount: Type.String({ description: 'Cents per unit as an exact decimal; for a flat fee, the fee' }),
      amount: Type.Integer({ description: 'Whole cents, rounded once, half to even' }),
      period: Nullable(Type.Object({ start: Timestamp, end: Timestamp })),
      credits: Type.Optional(
        Type.Integer({ description: 'Credits the calls spent from the balance (credits_applied lines)' }),
      ),
      discounts: Type.Optional(
        stringEnum(LINE_KINDS, 'The kind of the line a discount line takes its (negative) amount off'),
      ),
    }),
  ),
  total: Type.Integer({ description: 'Whole cents: the sum of the lines, and the amount charged' }),
  amountPaid: Type.Integer(),
  amountDue: Type.Integer(),
  attemptCount: Type.Integer(),
  paymentId: Nullable(Type.String({ description: 'The latest charge attempt (pay_…)' })),
  createdAt: Timestamp,
  finalizedAt: Nullable(Timestamp),
  paidAt: Nullable(Timestamp),
  closedAt: Nullable(
    Type.String({ format: 'date-time', description: 'When it was paid, voided or marked uncollectible' }),
  ),
  nextPaymentAttempt: Nullable(
    Type.String({
      format: 'date-time',
      description: 'When an unpaid final-usage invoice is charged again; null when no retry is due',
    }),
  ),
  hostedUrl: Nullable(
    Type.String({
      description: 'The invoice page to send the customer to; the link is its only key (null while a draft)',
    }),
  ),
  pdfUrl: Nullable(Type.String({ description: 'The same invoice as a PDF (null while a draft)' })),
});
export type Invoice = Static<typeof Invoice>;

export const InvoicePage = Type.Object({ data: Type.Array(Invoice), nextCursor: Nullable(Type.String()) });
export const InvoiceParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
export const InvoiceListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
    customerRef: Type.Optional(
      Type.String({ maxLength: 255, description: 'Customer reference or externalRef' }),
    ),
    purchaseRef: Type.Optional(Type.String({ maxLength: 100 })),
    status: Type.Optional(stringEnum(INVOICE_STATUSES)),
  },
  { additionalProperties: false },
);
