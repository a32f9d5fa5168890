import { Type } from '@sinclair/typebox';
import { stringEnum, Timestamp } from '../../http/schemas';
import { MeterName } from '../meters/schemas';

const RecordFields = {
  customerRef: Type.String({ description: 'Your customer reference' }),
  value: Type.Optional(Type.Number({ description: 'Defaults to 1; 0 to 1e15, at most 9 decimal places' })),
  properties: Type.Optional(
    Type.Object({}, { additionalProperties: true, description: 'Tags for filtering and analysis' }),
  ),
  timestamp: Type.Optional(
    Type.String({ description: 'When it happened (ISO 8601); defaults to now; up to 35 days back' }),
  ),
  id: Type.Optional(
    Type.String({ description: 'Record id; a record sent again with the same id counts once' }),
  ),
  idempotencyKey: Type.Optional(Type.String({ description: 'Alias of id' })),
};

export const MeterEventCreate = Type.Object(
  {
    ...RecordFields,
    meterName: Type.Optional({ ...MeterName, description: 'Meter name; defaults to requests' }),
  },
  { additionalProperties: false },
);

/** Requests larger than this are refused whole with 413; send several requests instead. */
export const MAX_BULK_RECORDS = 1000;

export const MeterEventBulk = Type.Object(
  {
    records: Type.Optional(
      Type.Array(MeterEventCreate, { description: `Up to ${MAX_BULK_RECORDS} records` }),
    ),
    events: Type.Optional(Type.Array(MeterEventCreate, { description: 'Alias of records' })),
  },
  { additionalProperties: false },
);

export const UsageCreate = Type.Object(
  {
    customerRef: RecordFields.customerRef,
    productRef: Type.String({ minLength: 1, maxLength: 100, description: 'Product id or reference' }),
    actionType: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'What was done, e.g. search' }),
    ),
    units: Type.Optional(Type.Number({ description: 'How much; defaults to 1' })),
    outcome: Type.Optional(Type.String({ minLength: 1, maxLength: 50, description: 'e.g. success, error' })),
    properties: RecordFields.properties,
    timestamp: RecordFields.timestamp,
    id: RecordFields.id,
    idempotencyKey: RecordFields.idempotencyKey,
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

export const AcceptedBulk = Type.Object({ accepted: Type.Integer(), records: Type.Array(AcceptedRecord) });

const Range = {
  from: Type.Optional(Type.String({ description: 'Inclusive start (ISO 8601 date or date-time)' })),
  to: Type.Optional(Type.String({ description: 'Exclusive end (ISO 8601 date or date-time); default: now' })),
};

export const UsageQuery = Type.Object(
  {
    ...Range,
    customerRef: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    granularity: Type.Optional(
      stringEnum(['hour', 'day', 'week', 'month'] as const, 'Also return UTC buckets of this size'),
    ),
    groupBy: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z0-9_.-]{1,64}$',
        description: 'Also count records per value of this property (e.g. outcome, tool, server)',
      }),
    ),
  },
  { additionalProperties: false },
);

const TotalDecimal = Type.String({
  pattern: '^-?\\d+(\\.\\d{1,9})?$',
  description:
    'The same total exactly, as a decimal string (up to 9 decimal places): `total` is a JSON number, which past about 15 significant digits holds only the nearest double',
});

const Bucket = Type.Object({
  start: Timestamp,
  total: Type.Number(),
  totalDecimal: TotalDecimal,
  records: Type.Integer(),
});

export const UsageTotal = Type.Object({
  meterRef: Type.String(),
  meterName: Type.String(),
  aggregation: Type.String(),
  customerRef: Type.Union([Type.String(), Type.Null()]),
  from: Timestamp,
  to: Timestamp,
  total: Type.Number({ description: 'The meter aggregation over [from, to)' }),
  totalDecimal: TotalDecimal,
  records: Type.Integer(),
  granularity: Type.Optional(Type.String()),
  buckets: Type.Optional(Type.Array(Bucket)),
  groupBy: Type.Optional(Type.String()),
  groups: Type.Optional(Type.Array(Type.Object({ value: Type.String(), records: Type.Integer() }))),
});

export const CustomerQuery = Type.Object(
  {
    ...Range,
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'Top N customers' }),
  },
  { additionalProperties: false },
);

export const CustomerUsage = Type.Object({
  meterRef: Type.String(),
  meterName: Type.String(),
  from: Timestamp,
  to: Timestamp,
  data: Type.Array(
    Type.Object({
      customerRef: Type.String(),
      total: Type.Number(),
      totalDecimal: TotalDecimal,
      records: Type.Integer(),
    }),
  ),
});

export const DailyQuery = Type.Object(
  {
    ...Range,
    customerRef: Type.Optional(
      Type.String({ minLength: 1, maxLength: 255, description: "One customer's days (id or externalRef)" }),
    ),
  },
  { additionalProperties: false },
);

export const DailyStats = Type.Object({
  from: Timestamp,
  to: Timestamp,
  data: Type.Array(
    Type.Object({
      date: Type.String({ format: 'date' }),
      records: Type.Integer(),
      customers: Type.Integer(),
      meters: Type.Integer(),
    }),
  ),
});

export const MeterParams = Type.Object({
  meterRef: Type.String({ minLength: 1, maxLength: 100, description: 'Meter id or name' }),
});
