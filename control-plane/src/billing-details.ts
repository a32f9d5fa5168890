import {
  countryName,
  isCountry,
  TAX_ID_KINDS,
  TAX_ID_TYPES,
  type TaxIdType,
  taxIdLabel,
} from '@mcp-meter/contracts/billing-details';
import { type Static, Type } from '@sinclair/typebox';
import { stringEnum, Timestamp } from './http/schemas';

export { countryName, isCountry, TAX_ID_TYPES, type TaxIdType, taxIdLabel };

/**
 * Who a bill is to and from, as an invoice names them: a postal address and tax ids. Customers
 * and providers (the merchant) keep both; an invoice keeps a copy of them as they stood when it
 * was finalized (billing/repository.ts), so a later move or a new VAT number never rewrites a
 * bill already issued.
 */

/** A line of an address: no control characters (they would break a page or a PDF), not blank. */
const Line = (maxLength: number, description?: string) =>
  Type.String({
    minLength: 1,
    maxLength,
    pattern: '^(?=.*\\S)[^\\u0000-\\u001f\\u007f]+$',
    ...(description === undefined ? {} : { description }),
  });

/** A postal address as the API takes it: any of its parts; given whole, it replaces the last one. */
export const AddressInput = Type.Object(
  {
    line1: Type.Optional(Line(200, 'Street and number, or P.O. box')),
    line2: Type.Optional(Line(200, 'Apartment, suite, building or floor')),
    city: Type.Optional(Line(100, 'City, town or village')),
    state: Type.Optional(Line(100, 'State, county, province or region')),
    postalCode: Type.Optional(Line(20, 'ZIP or postal code')),
    country: Type.Optional(
      Type.String({ pattern: '^[A-Za-z]{2}$', description: 'ISO 3166-1 alpha-2 (stored upper case)' }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type AddressInput = Static<typeof AddressInput>;

const Part = Type.Union([Type.String(), Type.Null()]);

/** A postal address as stored and answered: every part, null where none was given. */
export const Address = Type.Object({
  line1: Part,
  line2: Part,
  city: Part,
  state: Part,
  postalCode: Part,
  country: Part,
});
export type Address = Static<typeof Address>;

export const TaxId = Type.Object(
  {
    type: stringEnum(TAX_ID_TYPES, "The kind of id, in Stripe's names (eu_vat, gb_vat, us_ein, …)"),
    value: Type.String({
      minLength: 1,
      maxLength: 64,
      pattern: '^[^\\u0000-\\u001f\\u007f]+$',
      description: 'As written; stored without spaces, dots, dashes or slashes, upper case',
    }),
  },
  { additionalProperties: false },
);
export type TaxId = Static<typeof TaxId>;

/**
 * What the processor's check of a tax id against its registry found (Stripe's `verification`:
 * EU VAT ids against VIES, UK VAT against HMRC, Australian ABNs), as Stripe reports it.
 */
export const TAX_ID_VERIFICATION_STATUSES = ['pending', 'verified', 'unverified', 'unavailable'] as const;
export const TaxIdVerification = Type.Object({
  status: stringEnum(
    TAX_ID_VERIFICATION_STATUSES,
    'pending: being checked; verified or unverified: the registry’s answer; unavailable: the registry could not be asked',
  ),
  verifiedName: Type.Union([Type.String(), Type.Null()], { description: 'The name the registry holds' }),
  verifiedAddress: Type.Union([Type.String(), Type.Null()], {
    description: 'The address the registry holds',
  }),
  updatedAt: Timestamp,
});
export type TaxIdVerification = Static<typeof TaxIdVerification>;

/** A tax id as a customer holds it: as given, and what the processor's registry check found. */
export const CustomerTaxId = Type.Object({
  type: TaxId.properties.type,
  value: Type.String(),
  verification: Type.Union([TaxIdVerification, Type.Null()], {
    description:
      'The processor’s check against the tax registry (live customers whose processor checks this kind); null until one is reported',
  }),
});
export type CustomerTaxId = Static<typeof CustomerTaxId>;

/** A tax id as stored on a customer: the verification is kept once the processor reports one. */
export type StoredTaxId = TaxId & { verification?: TaxIdVerification };

/**
 * The tax ids given, each keeping the verification the same id (kind and number) had before: a
 * list sent again unchanged, or with one id more, does not lose what the registry said.
 */
export function keepVerifications(next: readonly TaxId[], before: readonly StoredTaxId[]): StoredTaxId[] {
  return next.map((taxId) => {
    const verification = before.find((b) => b.type === taxId.type && b.value === taxId.value)?.verification;
    return verification === undefined ? { type: taxId.type, value: taxId.value } : { ...taxId, verification };
  });
}

/** A customer's tax ids as the API answers them. */
export const customerTaxIds = (stored: readonly StoredTaxId[]): CustomerTaxId[] =>
  stored.map((t) => ({ type: t.type, value: t.value, verification: t.verification ?? null }));

/** A customer's tax ids as the API takes them: the whole list, which replaces the last one. */
export const TaxIdsInput = Type.Array(TaxId, {
  maxItems: 5,
  description: 'Up to 5; the list given replaces the last one ([] clears it)',
});

/** A problem with one part of what was given, as the API's validation errors name it. */
export interface DetailProblem {
  path: string;
  message: string;
}

/** An address as stored, from what was given under `path`: parts trimmed, the country checked. */
export function normalizeAddress(input: AddressInput, path: string, problems: DetailProblem[]): Address {
  const part = (value: string | undefined) => {
    const text = value?.trim() ?? '';
    return text === '' ? null : text;
  };
  const country = input.country === undefined ? null : input.country.toUpperCase();
  if (country !== null && !isCountry(country))
    problems.push({ path: `${path}/country`, message: 'is not an ISO 3166-1 alpha-2 code' });
  return {
    line1: part(input.line1),
    line2: part(input.line2),
    city: part(input.city),
    state: part(input.state),
    postalCode: part(input.postalCode),
    country,
  };
}

/** A tax id's number as stored: without spaces, dots, dashes or slashes, upper case. */
export const compactTaxId = (value: string) => value.replace(/[\s./-]/gu, '').toUpperCase();

/** Tax ids as stored, from the list given under `path`: compacted, each checked for its form, no repeats. */
export function normalizeTaxIds(input: readonly TaxId[], path: string, problems: DetailProblem[]): TaxId[] {
  const seen = new Set<string>();
  return input.map((taxId, index) => {
    const kind = TAX_ID_KINDS[taxId.type];
    const value = compactTaxId(taxId.value);
    if (!kind.form.test(value))
      problems.push({
        path: `${path}/${index}/value`,
        message: `is not a valid ${kind.label} number (e.g. ${kind.example})`,
      });
    else if (seen.has(`${taxId.type}:${value}`))
      problems.push({ path: `${path}/${index}`, message: 'is already in the list' });
    seen.add(`${taxId.type}:${value}`);
    return { type: taxId.type, value };
  });
}

/** An address as the lines of an envelope: the parts given, the country by name last. */
export function addressLines(address: Address | null): string[] {
  if (address === null) return [];
  const town = [address.city, address.state, address.postalCode].filter((part) => part !== null).join(', ');
  return [
    address.line1,
    address.line2,
    town === '' ? null : town,
    address.country === null ? null : countryName(address.country),
  ].filter((line): line is string => line !== null);
}
