import { type Static, Type } from '@sinclair/typebox';
import { Address, AddressInput } from '../../billing-details';
import { nullable } from '../../http/schemas';

const Url = Type.String({ format: 'uri' });

/** Spec 2.1: the customer-facing subset of the provider; optional fields appear only when set. */
export const Merchant = Type.Object({
  displayName: Type.String(),
  legalName: Type.String(),
  companyNumber: Type.Optional(Type.String()),
  country: Type.Optional(Type.String()),
  defaultCurrency: Type.Optional(Type.String()),
  iconUrl: Type.Optional(Url),
  logoUrl: Type.Optional(Url),
  brandColor: Type.Optional(
    Type.String({ description: 'Colour of the hosted pages (checkout, sign-in, invoices), #rrggbb' }),
  ),
  privacyUrl: Type.Optional(Url),
  termsUrl: Type.Optional(Url),
  statementDescriptor: Type.Optional(Type.String()),
  supportedTopupCurrencies: Type.Optional(Type.Array(Type.String())),
  supportEmail: Type.Optional(Type.String()),
  supportUrl: Type.Optional(Url),
  taxId: Type.Optional(Type.String()),
  vatNumber: Type.Optional(Type.String()),
  address: Type.Optional(Address),
});
export type Merchant = Static<typeof Merchant>;

const WebUrl = Type.String({
  format: 'uri',
  pattern: '^https?://',
  maxLength: 2048,
  description: 'Absolute http(s) URL',
});
const Currency = Type.String({ pattern: '^[A-Za-z]{3}$', description: 'ISO 4217 code' });

/** Every field of spec 2.1; null clears an optional one. */
export const MerchantUpdate = Type.Object(
  {
    displayName: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    legalName: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    companyNumber: nullable(Type.String({ minLength: 1, maxLength: 64 })),
    country: nullable(Type.String({ pattern: '^[A-Za-z]{2}$', description: 'ISO 3166-1 alpha-2' })),
    defaultCurrency: nullable(Currency),
    iconUrl: nullable(WebUrl),
    logoUrl: nullable(WebUrl),
    brandColor: nullable(
      Type.String({
        pattern: '^#[0-9A-Fa-f]{6}$',
        description: "Colour of the hosted pages' buttons and links, #rrggbb (stored lowercase)",
      }),
    ),
    privacyUrl: nullable(WebUrl),
    termsUrl: nullable(WebUrl),
    statementDescriptor: nullable(
      Type.String({
        minLength: 5,
        maxLength: 22,
        pattern: '^[^<>\\\\\'"*]*[A-Za-z][^<>\\\\\'"*]*$',
        description: '5-22 characters with a letter; no < > \\ \' " *',
      }),
    ),
    supportedTopupCurrencies: nullable(
      Type.Array(Currency, { minItems: 1, maxItems: 20, uniqueItems: true }),
    ),
    supportEmail: nullable(Type.String({ format: 'email', maxLength: 254 })),
    supportUrl: nullable(WebUrl),
    taxId: nullable(Type.String({ minLength: 1, maxLength: 64 })),
    vatNumber: nullable(
      Type.String({
        pattern: '^[A-Za-z]{2}[A-Za-z0-9 ]{2,14}$',
        description: 'Country prefix then 2-14 characters',
      }),
    ),
    /** The postal address invoices give under the legal name; given whole, it replaces the last one. */
    address: nullable(AddressInput),
  },
  { additionalProperties: false, minProperties: 1 },
);
