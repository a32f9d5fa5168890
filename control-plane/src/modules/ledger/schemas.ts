import { Type } from '@sinclair/typebox';
import { Nullable, stringEnum, Timestamp } from '../../http/schemas';
import { TRANSACTION_KINDS } from './repository';

export const Transaction = Type.Object({
  id: Type.String({ description: 'Transaction id (txn_…); for a payment, its transaction reference' }),
  type: stringEnum(TRANSACTION_KINDS),
  amount: Type.Integer({
    description: 'Minor units before fees: positive for money in (payments), negative for money out',
  }),
  fee: Type.Integer({ description: "The platform's fee on it, minor units" }),
  net: Type.Integer({ description: "What it moved in the provider's processor balance: amount − fee" }),
  currency: Type.String(),
  customerRef: Nullable(Type.String()),
  paymentId: Nullable(Type.String()),
  source: Type.String({ description: 'The payment, refund, dispute or payout it records' }),
  description: Type.String(),
  createdAt: Timestamp,
});

export const TransactionPage = Type.Object({
  data: Type.Array(Transaction),
  nextCursor: Nullable(Type.String()),
});

export const TransactionQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 300 })),
    type: Type.Optional(stringEnum(TRANSACTION_KINDS)),
    customerRef: Type.Optional(Type.String({ maxLength: 255 })),
    currency: Type.Optional(Type.String({ pattern: '^[A-Za-z]{3}$' })),
    from: Type.Optional(Type.String({ maxLength: 40, description: 'ISO-8601; inclusive' })),
    to: Type.Optional(Type.String({ maxLength: 40, description: 'ISO-8601; exclusive' })),
    format: Type.Optional(
      stringEnum(['json', 'csv'] as const, 'csv: every matching transaction (up to 100,000) as a CSV file'),
    ),
  },
  { additionalProperties: false },
);
