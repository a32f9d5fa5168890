import { Type } from '@sinclair/typebox';
import { stringEnum, Timestamp } from '../../http/schemas';
import { ALERT_KINDS } from './repository';

export const AlertCreate = Type.Object(
  {
    planRef: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'Every customer holding this plan (pln_…)' }),
    ),
    customerRef: Type.Optional(
      Type.String({ minLength: 1, maxLength: 255, description: 'One customer (cus_… or your externalRef)' }),
    ),
    kind: stringEnum(
      ALERT_KINDS,
      'allowance_percent: the calls of a period reached `threshold` percent of the plan’s limit; credit_balance: the credit balance fell below `threshold` credits; spend_amount: a period’s spend (its price plus the usage so far) reached `threshold` minor units (plans that price usage)',
    ),
    threshold: Type.Integer({ minimum: 0, maximum: 1_000_000_000_000 }),
  },
  { additionalProperties: false },
);

export const Alert = Type.Object({
  id: Type.String({ description: 'alr_…' }),
  planRef: Type.Union([Type.String(), Type.Null()]),
  customerRef: Type.Union([Type.String(), Type.Null()]),
  kind: stringEnum(ALERT_KINDS),
  threshold: Type.Integer(),
  createdAt: Timestamp,
});

export const AlertList = Type.Object({ data: Type.Array(Alert) });

export const AlertListQuery = Type.Object(
  {
    planRef: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    customerRef: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  },
  { additionalProperties: false },
);

export const AlertParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
