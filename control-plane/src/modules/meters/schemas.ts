import { Type } from '@sinclair/typebox';
import { page, stringEnum, Timestamp } from '../../http/schemas';
import { AGGREGATIONS } from './repository';

export const MeterName = Type.String({
  pattern: '^[a-z0-9][a-z0-9_.-]{0,63}$',
  description: 'Lower-case name, unique per environment (letters, digits, _ . -)',
});

export const MeterCreate = Type.Object(
  {
    name: MeterName,
    aggregation: stringEnum(
      AGGREGATIONS,
      'sum of values, count of records, max value, or distinct values of valueProperty',
    ),
    valueProperty: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description: 'The property whose distinct values unique_count counts',
      }),
    ),
    description: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);

export const Meter = Type.Object({
  id: Type.String(),
  reference: Type.String(),
  name: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  aggregation: stringEnum(AGGREGATIONS),
  valueProperty: Type.Union([Type.String(), Type.Null()]),
  status: stringEnum(['active', 'archived'] as const),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const MeterPage = page(Meter);
export const MeterParams = Type.Object({
  meterRef: Type.String({ minLength: 1, maxLength: 100, description: 'Meter id or name' }),
});
