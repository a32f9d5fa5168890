import { Type } from '@sinclair/typebox';
import { Nullable, stringEnum, Timestamp } from '../../http/schemas';

export const DISPUTE_STATUSES = ['needs_response', 'under_review', 'won', 'lost'] as const;

export const Dispute = Type.Object({
  id: Type.String({ description: 'Dispute id (dp_…)' }),
  paymentId: Type.String(),
  customerRef: Type.String(),
  amount: Type.Integer({ description: 'Withdrawn from the balance while the dispute is open; minor units' }),
  currency: Type.String(),
  reason: Type.String(),
  status: stringEnum(DISPUTE_STATUSES),
  evidence: Nullable(Type.String()),
  processorDispute: Type.String(),
  createdAt: Timestamp,
  closedAt: Nullable(Timestamp),
});

export const DisputePage = Type.Object({ data: Type.Array(Dispute), nextCursor: Nullable(Type.String()) });
export const DisputeParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
export const DisputeListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
    status: Type.Optional(stringEnum(DISPUTE_STATUSES)),
  },
  { additionalProperties: false },
);
export const EvidenceBody = Type.Object(
  { evidence: Type.String({ minLength: 1, maxLength: 20_000, description: 'Your answer to the bank' }) },
  { additionalProperties: false },
);
export const SandboxDisputeBody = Type.Object(
  {
    transactionId: Type.String({
      minLength: 1,
      maxLength: 100,
      description: 'The payment id or its transaction reference',
    }),
    amount: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1_000_000_000_000,
        description: 'Default: all that is left of it',
      }),
    ),
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Default fraudulent' })),
  },
  { additionalProperties: false },
);
export const SandboxCloseBody = Type.Object(
  { outcome: stringEnum(['won', 'lost'] as const) },
  { additionalProperties: false },
);
