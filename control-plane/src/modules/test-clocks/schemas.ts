import { Type } from '@sinclair/typebox';
import { Nullable, Timestamp } from '../../http/schemas';

/** A moment as an ISO 8601 date-time or Unix seconds (as Stripe's `frozen_time`). */
export const FrozenTime = Type.Union(
  [
    Type.String({ format: 'date-time', maxLength: 40 }),
    Type.Integer({ minimum: 946_684_800, maximum: 32_503_680_000 }),
  ],
  { description: 'ISO 8601 date-time, or Unix seconds; between 2000 and 3000' },
);

export const TestClock = Type.Object({
  id: Type.String({ description: 'Test clock id (tc_…)' }),
  name: Nullable(Type.String()),
  frozenTime: Timestamp,
  status: Type.Union([Type.Literal('ready'), Type.Literal('advancing')]),
  createdAt: Timestamp,
});

export const TestClockCreate = Type.Object(
  { frozenTime: FrozenTime, name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) },
  { additionalProperties: false },
);
export const TestClockAdvance = Type.Object({ frozenTime: FrozenTime }, { additionalProperties: false });
export const TestClockParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
export const TestClockList = Type.Object({ data: Type.Array(TestClock) });
