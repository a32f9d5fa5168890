import { type Static, Type } from '@sinclair/typebox';
import { Nullable, Timestamp } from '../../http/schemas';

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
  total: Type.Integer({ description: 'Whole cents: the sum of the lines' }),
});
export type UpcomingInvoice = Static<typeof UpcomingInvoice>;

export const UpcomingQuery = Type.Object(
  { purchaseRef: Type.String({ minLength: 1, maxLength: 100 }) },
  { additionalProperties: false },
);
