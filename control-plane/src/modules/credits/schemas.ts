import { Type } from '@sinclair/typebox';
import { Metadata, page, stringEnum, Timestamp } from '../../http/schemas';

export const CREDIT_KINDS = ['top_up', 'grant', 'debit', 'adjustment'] as const;
/** What the ledger lists: the kinds a provider moves, and `usage`, the debits of calls served. */
export const MOVEMENT_KINDS = [...CREDIT_KINDS, 'usage'] as const;

export const CreditMovementCreate = Type.Object(
  {
    kind: stringEnum(
      CREDIT_KINDS,
      'top_up (bought; needs Idempotency-Key), grant (given), debit (spent), adjustment (manual, signed)',
    ),
    amount: Type.Optional(
      Type.Integer({
        minimum: -1_000_000_000_000,
        maximum: 1_000_000_000_000,
        description: 'Credits: positive for top_up, grant and debit; signed and non-zero for adjustment',
      }),
    ),
    units: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1_000_000_000,
        description: 'debit only: usage units, charged at the plan creditsPerUnit',
      }),
    ),
    planRef: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'debit only, with units' }),
    ),
    productRef: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);

export const CreditMovement = Type.Object({
  id: Type.String(),
  customerRef: Type.String(),
  kind: stringEnum(MOVEMENT_KINDS),
  amount: Type.Integer({ description: 'Signed change in credits' }),
  balance: Type.Integer({ description: 'Balance after this movement' }),
  reason: Type.Union([Type.String(), Type.Null()]),
  productRef: Type.Union([Type.String(), Type.Null()]),
  metadata: Type.Record(Type.String(), Type.String()),
  createdAt: Timestamp,
});

export const CreditPage = page(CreditMovement);

export const Balance = Type.Object({
  customerRef: Type.String(),
  credits: Type.Integer(),
  lowBalanceThreshold: Type.Integer(),
  updatedAt: Type.Union([Timestamp, Type.Null()]),
});

export const Settings = Type.Object({
  lowBalanceThreshold: Type.Integer({
    minimum: 0,
    maximum: 1_000_000_000_000,
    description: 'customer.credit.low_balance fires when a balance drops below this',
  }),
});
export const SettingsUpdate = Type.Object(
  { lowBalanceThreshold: Settings.properties.lowBalanceThreshold },
  { additionalProperties: false },
);
