import { type Static, Type } from '@sinclair/typebox';

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
  privacyUrl: Type.Optional(Url),
  termsUrl: Type.Optional(Url),
  statementDescriptor: Type.Optional(Type.String()),
  supportedTopupCurrencies: Type.Optional(Type.Array(Type.String())),
  supportEmail: Type.Optional(Type.String()),
  supportUrl: Type.Optional(Url),
  taxId: Type.Optional(Type.String()),
  vatNumber: Type.Optional(Type.String()),
});
export type Merchant = Static<typeof Merchant>;
