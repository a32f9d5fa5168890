import { type Static, Type } from '@sinclair/typebox';
import { Address, AddressInput, CustomerTaxId, TaxIdsInput } from '../../billing-details';
import { Metadata, Nullable, nullable, page, stringEnum, Timestamp } from '../../http/schemas';

const ExternalRef = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: '^[^\\s]+$',
  description: 'Your own id for the customer (no spaces); unique among live customers',
});
export const Name = Type.String({ minLength: 1, maxLength: 200 });
export const Email = Type.String({ format: 'email', maxLength: 254 });
export const Telephone = Type.String({
  pattern: '^\\+?[0-9][0-9 ().-]{3,30}$',
  description: 'E.164 preferred, e.g. +447700900123',
});

export const CustomerCreate = Type.Object(
  {
    externalRef: Type.Optional(ExternalRef),
    name: Type.Optional(Name),
    email: Type.Optional(Email),
    telephone: Type.Optional(Telephone),
    address: Type.Optional(AddressInput),
    taxIds: Type.Optional(TaxIdsInput),
    metadata: Type.Optional(Metadata),
    testClock: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: 'Sandbox: the test clock (tc_…) the customer lives on',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CustomerCreate = Static<typeof CustomerCreate>;

export const CustomerEnsure = Type.Object(
  {
    externalRef: ExternalRef,
    name: Type.Optional(Name),
    email: Type.Optional(Email),
    telephone: Type.Optional(Telephone),
    address: Type.Optional(AddressInput),
    taxIds: Type.Optional(TaxIdsInput),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);

export const CustomerUpdate = Type.Object(
  {
    externalRef: nullable(ExternalRef),
    name: nullable(Name),
    email: nullable(Email),
    telephone: nullable(Telephone),
    /** Given whole, it replaces the last address; null clears it. */
    address: nullable(AddressInput),
    taxIds: Type.Optional(TaxIdsInput),
    status: Type.Optional(stringEnum(['active', 'inactive'] as const)),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type CustomerUpdate = Static<typeof CustomerUpdate>;

const NullableString = Type.Union([Type.String(), Type.Null()]);

export const Customer = Type.Object({
  reference: Type.String({ description: 'Customer reference (cus_…); also its id' }),
  id: Type.String(),
  externalRef: NullableString,
  name: NullableString,
  email: NullableString,
  telephone: NullableString,
  address: Nullable(Address),
  taxIds: Type.Array(CustomerTaxId, { description: 'Tax ids invoices name the customer by' }),
  status: stringEnum(['active', 'inactive'] as const),
  metadata: Type.Record(Type.String(), Type.String()),
  testClock: Type.Union([Type.String(), Type.Null()], {
    description: 'Sandbox: the test clock the customer lives on, or null',
  }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type Customer = Static<typeof Customer>;

export const CustomerPage = page(Customer);
export const CustomerParams = Type.Object({
  ref: Type.String({
    minLength: 1,
    maxLength: 255,
    description: 'Customer reference (cus_…) or your externalRef',
  }),
});
export const CustomerListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
    externalRef: Type.Optional(Type.String({ maxLength: 255 })),
    email: Type.Optional(Type.String({ maxLength: 254 })),
  },
  { additionalProperties: false },
);
