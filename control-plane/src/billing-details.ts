import { type Static, Type } from '@sinclair/typebox';
import { stringEnum } from './http/schemas';

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

/**
 * The kinds of tax id taken, Stripe's names for them, with the form each has once spaces, dots,
 * dashes and slashes are taken out and letters upper-cased. A value is checked for its form only:
 * whether the tax authority knows it is not asked.
 */
const TAX_ID_KINDS = {
  ae_trn: { label: 'AE TRN', form: /^[0-9]{15}$/, example: '123456789012345' },
  au_abn: { label: 'AU ABN', form: /^[0-9]{11}$/, example: '12345678912' },
  br_cnpj: { label: 'BR CNPJ', form: /^[0-9]{14}$/, example: '01234567000189' },
  ca_bn: { label: 'CA BN', form: /^[0-9]{9}$/, example: '123456789' },
  ca_gst_hst: { label: 'CA GST/HST', form: /^[0-9]{9}RT[0-9]{4}$/, example: '123456789RT0002' },
  ch_vat: { label: 'CH VAT', form: /^CHE[0-9]{9}(MWST|TVA|IVA)?$/, example: 'CHE-123.456.789 MWST' },
  eu_vat: {
    label: 'EU VAT',
    form: /^(AT|BE|BG|CY|CZ|DE|DK|EE|EL|ES|FI|FR|HR|HU|IE|IT|LT|LU|LV|MT|NL|PL|PT|RO|SE|SI|SK|XI)[0-9A-Z]{2,12}$/,
    example: 'DE123456789',
  },
  gb_vat: { label: 'GB VAT', form: /^GB([0-9]{9}|[0-9]{12}|GD[0-9]{3}|HA[0-9]{3})$/, example: 'GB123456789' },
  in_gst: {
    label: 'IN GST',
    form: /^[0-9]{2}[A-Z]{5}[0-9]{4}[A-Z][0-9A-Z]Z[0-9A-Z]$/,
    example: '12ABCDE3456FGZH',
  },
  jp_cn: { label: 'JP CN', form: /^[0-9]{13}$/, example: '1234567891234' },
  no_vat: { label: 'NO VAT', form: /^[0-9]{9}MVA$/, example: '123456789MVA' },
  nz_gst: { label: 'NZ GST', form: /^[0-9]{8,9}$/, example: '123456789' },
  sg_gst: { label: 'SG GST', form: /^[A-Z0-9]{9,10}$/, example: 'M12345678X' },
  us_ein: { label: 'US EIN', form: /^[0-9]{9}$/, example: '12-3456789' },
  za_vat: { label: 'ZA VAT', form: /^4[0-9]{9}$/, example: '4123456789' },
} as const;
export type TaxIdType = keyof typeof TAX_ID_KINDS;
export const TAX_ID_TYPES = Object.keys(TAX_ID_KINDS) as TaxIdType[];

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

/** A customer's tax ids as the API takes them: the whole list, which replaces the last one. */
export const TaxIdsInput = Type.Array(TaxId, {
  maxItems: 5,
  description: 'Up to 5; the list given replaces the last one ([] clears it)',
});

/** What a tax id is called on an invoice ("EU VAT"). */
export const taxIdLabel = (type: string): string =>
  (TAX_ID_KINDS as Record<string, { label: string }>)[type]?.label ?? type;

const REGIONS = new Intl.DisplayNames(['en'], { type: 'region', fallback: 'code' });
/** CLDR also names groupings and placeholders that are not ISO 3166-1 countries. */
const NOT_COUNTRIES = new Set(['ZZ', 'EU', 'EZ', 'UN', 'QO']);

/** Whether an upper-case code is an ISO 3166-1 alpha-2 country (CLDR's list, less groupings). */
export const isCountry = (code: string): boolean =>
  /^[A-Z]{2}$/.test(code) && !NOT_COUNTRIES.has(code) && !code.startsWith('X') && REGIONS.of(code) !== code;

/** The English name of a country code, for an address on an invoice. */
export const countryName = (code: string): string => REGIONS.of(code) ?? code;

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

/** Tax ids as stored, from the list given under `path`: compacted, each checked for its form, no repeats. */
export function normalizeTaxIds(input: readonly TaxId[], path: string, problems: DetailProblem[]): TaxId[] {
  const seen = new Set<string>();
  return input.map((taxId, index) => {
    const kind = TAX_ID_KINDS[taxId.type];
    const value = taxId.value.replace(/[\s./-]/gu, '').toUpperCase();
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
