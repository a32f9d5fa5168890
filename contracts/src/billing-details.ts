/**
 * The words and forms of billing details that the control plane checks and the console and
 * hosted pages show: the kinds of tax id, and the ISO 3166-1 countries. One list, so a page never
 * offers a kind or a country the API refuses.
 */

/**
 * The kinds of tax id taken, Stripe's names for them, with the form each has once spaces, dots,
 * dashes and slashes are taken out and letters upper-cased. A value is checked for its form only:
 * whether the tax authority knows it is not asked.
 */
export const TAX_ID_KINDS = {
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

/**
 * The countries whose businesses have each kind (ISO 3166-1; Greece is GR though its VAT numbers
 * start EL): where a checkout that requires a tax ID "if supported" asks for one, as Stripe
 * Checkout's `tax_id_collection[required]: if_supported` asks where it collects a kind.
 */
export const TAX_ID_COUNTRIES: Record<TaxIdType, readonly string[]> = {
  ae_trn: ['AE'],
  au_abn: ['AU'],
  br_cnpj: ['BR'],
  ca_bn: ['CA'],
  ca_gst_hst: ['CA'],
  ch_vat: ['CH', 'LI'],
  eu_vat: [
    'AT',
    'BE',
    'BG',
    'CY',
    'CZ',
    'DE',
    'DK',
    'EE',
    'GR',
    'ES',
    'FI',
    'FR',
    'HR',
    'HU',
    'IE',
    'IT',
    'LT',
    'LU',
    'LV',
    'MT',
    'NL',
    'PL',
    'PT',
    'RO',
    'SE',
    'SI',
    'SK',
  ],
  gb_vat: ['GB'],
  in_gst: ['IN'],
  jp_cn: ['JP'],
  no_vat: ['NO'],
  nz_gst: ['NZ'],
  sg_gst: ['SG'],
  us_ein: ['US'],
  za_vat: ['ZA'],
};

/** The countries where some kind of tax ID is taken, sorted. */
export const TAX_ID_COUNTRY_CODES: readonly string[] = [
  ...new Set(Object.values(TAX_ID_COUNTRIES).flat()),
].sort();

/** Whether businesses of `country` (upper case) have a kind of tax ID taken here. */
export const hasTaxIdKind = (country: string): boolean => TAX_ID_COUNTRY_CODES.includes(country);

/** The first kind of tax ID of `country`'s businesses (Germany: eu_vat), what a form picks for it. */
export const taxIdKindOf = (country: string | null | undefined): TaxIdType | undefined =>
  country == null ? undefined : TAX_ID_TYPES.find((type) => TAX_ID_COUNTRIES[type].includes(country));

/** What a tax id is called on an invoice ("EU VAT"). */
export const taxIdLabel = (type: string): string =>
  (TAX_ID_KINDS as Record<string, { label: string }>)[type]?.label ?? type;

const REGIONS = new Intl.DisplayNames(['en'], { type: 'region', fallback: 'code' });
/** CLDR also names groupings and placeholders that are not ISO 3166-1 countries. */
const NOT_COUNTRIES = new Set(['ZZ', 'EU', 'EZ', 'UN', 'QO']);

/** Whether an upper-case code is an ISO 3166-1 alpha-2 country (CLDR's list, less groupings). */
export const isCountry = (code: string): boolean =>
  /^[A-Z]{2}$/.test(code) && !NOT_COUNTRIES.has(code) && !code.startsWith('X') && REGIONS.of(code) !== code;

/** The English name of a country code, for an address. */
export const countryName = (code: string): string => REGIONS.of(code) ?? code;

/** Every ISO 3166-1 country by English name, for a form's list (made on first use). */
export function countries(): Array<{ code: string; name: string }> {
  return Array.from({ length: 26 * 26 }, (_, i) =>
    String.fromCharCode(65 + Math.floor(i / 26), 65 + (i % 26)),
  )
    .filter(isCountry)
    .map((code) => ({ code, name: countryName(code) }))
    .sort((a, b) => a.name.localeCompare(b.name, 'en'));
}
