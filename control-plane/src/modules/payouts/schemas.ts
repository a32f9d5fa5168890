import { Type } from '@sinclair/typebox';
import { Nullable, stringEnum, Timestamp } from '../../http/schemas';

export const PAYOUT_STATUSES = ['pending', 'paid', 'failed'] as const;

export const Payout = Type.Object({
  id: Type.String({ description: 'Payout id (po_…)' }),
  amount: Type.Integer({ description: 'Minor units' }),
  currency: Type.String(),
  status: stringEnum(PAYOUT_STATUSES),
  arrivalDate: Timestamp,
  failureReason: Nullable(Type.String()),
  processorPayout: Type.String(),
  automatic: Type.Boolean({ description: 'Made by the payout schedule (else on request)' }),
  createdAt: Timestamp,
});

export const PayoutPage = Type.Object({ data: Type.Array(Payout), nextCursor: Nullable(Type.String()) });
export const PayoutParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
export const PayoutListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
    status: Type.Optional(stringEnum(PAYOUT_STATUSES)),
  },
  { additionalProperties: false },
);
export const SandboxPayoutBody = Type.Object(
  {
    amount: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1_000_000_000_000, description: 'Default: the whole balance' }),
    ),
    currency: Type.Optional(Type.String({ pattern: '^[A-Za-z]{3}$', description: 'Default usd' })),
    failure: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description:
          'Make the payout fail on arrival with this reason (e.g. account_closed); the money returns',
      }),
    ),
  },
  { additionalProperties: false },
);
