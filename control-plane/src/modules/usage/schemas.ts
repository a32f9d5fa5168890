import { Type } from '@sinclair/typebox';
import { Timestamp } from '../../http/schemas';

const MeterName = Type.String({
  pattern: '^[a-z0-9][a-z0-9_.-]{0,63}$',
  description: 'Meter name; defaults to requests',
});

export const MeterEventCreate = Type.Object(
  {
    customerRef: Type.String({ description: 'Your customer reference' }),
    meterName: Type.Optional(MeterName),
    value: Type.Optional(Type.Number({ description: 'Defaults to 1; at most 9 decimal places' })),
    properties: Type.Optional(
      Type.Object({}, { additionalProperties: true, description: 'Tags for filtering and analysis' }),
    ),
    timestamp: Type.Optional(Type.String({ description: 'When it happened (ISO 8601); defaults to now' })),
    id: Type.Optional(
      Type.String({ description: 'Record id; a record sent again with the same id counts once' }),
    ),
    idempotencyKey: Type.Optional(Type.String({ description: 'Alias of id' })),
  },
  { additionalProperties: false },
);

export const AcceptedRecord = Type.Object({
  id: Type.String(),
  meterRef: Type.String(),
  meterName: Type.String(),
  customerRef: Type.String(),
  value: Type.Number(),
  timestamp: Timestamp,
});

export const UsageQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({ description: 'Inclusive start (ISO 8601 date or date-time); default: all time' }),
    ),
    to: Type.Optional(
      Type.String({ description: 'Exclusive end (ISO 8601 date or date-time); default: now' }),
    ),
    customerRef: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  },
  { additionalProperties: false },
);

export const UsageTotal = Type.Object({
  meterRef: Type.String(),
  meterName: Type.String(),
  customerRef: Type.Union([Type.String(), Type.Null()]),
  from: Timestamp,
  to: Timestamp,
  total: Type.Number({ description: 'Sum of record values in [from, to)' }),
  records: Type.Integer(),
});

export const MeterParams = Type.Object({
  meterRef: Type.String({ minLength: 1, maxLength: 100, description: 'Meter id or name' }),
});
