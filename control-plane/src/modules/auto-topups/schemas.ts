import { Type } from '@sinclair/typebox';
import { Timestamp } from '../../http/schemas';

export const AutoTopUpUpdate = Type.Object(
  {
    productRef: Type.String({
      minLength: 1,
      maxLength: 100,
      description: "The product whose plan's top-up pack is bought (the customer's current plan of it)",
    }),
    threshold: Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000_000,
      description: 'A top-up fires when the credit balance falls below this many credits',
    }),
    packs: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 100, description: 'Packs bought per top-up (default 1)' }),
    ),
  },
  { additionalProperties: false },
);

export const AutoTopUp = Type.Object({
  id: Type.String({ description: 'atu_…' }),
  customerRef: Type.String(),
  productRef: Type.String({ description: 'The product (prd_…)' }),
  threshold: Type.Integer(),
  packs: Type.Integer(),
  status: Type.Union([Type.Literal('active'), Type.Literal('stopped')], {
    description: `stopped after ${3} failed attempts in a row; set it again to resume`,
  }),
  failures: Type.Integer({ description: 'Failed attempts in a row' }),
  lastFailure: Type.Union([Type.String(), Type.Null()], {
    description: 'Why the last attempt failed (card_declined, no_payment_method, no_plan, no_top_up_pack, …)',
  }),
  retryAt: Type.Union([Timestamp, Type.Null()], {
    description: 'A failed attempt holds the next one back until then',
  }),
  updatedAt: Timestamp,
});
