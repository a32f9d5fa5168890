import {
  countries,
  TAX_ID_COUNTRIES,
  TAX_ID_COUNTRY_CODES,
  TAX_ID_TYPES,
  taxIdKindOf,
  taxIdLabel,
} from '@mcp-meter/contracts/billing-details';
import type { Address } from '../../billing-details';
import { escapeHtml } from '../../http/html';

/** What the hosted page asks besides a card: a billing address, a tax id; null when neither. */
export interface BillingAsk {
  /** The address fields, filled with the customer's current address. */
  address: Address | null | false;
  /** `required`: the customer has no tax id and the session requires one. */
  taxId: false | 'optional' | 'required';
}

/** Every ISO 3166-1 country, by English name, for the address's list. */
const COUNTRIES = countries();

/**
 * The page's billing fields (inside its payment form): the address, required as the session
 * says, filled with what the customer has; the tax id, behind "buying as a business" when it is
 * optional, shown and required when the session requires one of a customer who has none.
 */
export function billingFields(ask: BillingAsk | null): string {
  if (ask === null) return '';
  let html = '';
  if (ask.address !== false) {
    const a = ask.address;
    const field = (
      name: keyof Address,
      label: string,
      autocomplete: string,
      max: number,
      required: boolean,
    ) =>
      `<label for="billing-${name}">${label}</label><input id="billing-${name}" name="${name}" autocomplete="billing ${autocomplete}" maxlength="${max}"${required ? ' required' : ''} value="${escapeHtml(a?.[name] ?? '')}">`;
    const options = COUNTRIES.map(
      ({ code, name }) =>
        `<option value="${code}"${a?.country === code ? ' selected' : ''}>${escapeHtml(name)}</option>`,
    ).join('');
    html += `<fieldset id="billing-address"><legend>Billing address</legend>
${field('line1', 'Address line 1', 'address-line1', 200, true)}
${field('line2', 'Address line 2 (optional)', 'address-line2', 200, false)}
${field('city', 'City', 'address-level2', 100, true)}
${field('state', 'State, county or region (optional)', 'address-level1', 100, false)}
${field('postalCode', 'Postal code', 'postal-code', 20, false)}
<label for="billing-country">Country</label><select id="billing-country" name="country" autocomplete="billing country" required><option value="">Choose a country</option>${options}</select>
</fieldset>`;
  }
  if (ask.taxId !== false) {
    // Each kind names its countries: with an address, the script offers the chosen country's.
    const first = taxIdKindOf(ask.address === false ? null : ask.address?.country);
    const kinds = TAX_ID_TYPES.map(
      (type) =>
        `<option value="${type}" data-countries="${TAX_ID_COUNTRIES[type].join(' ')}"${type === first ? ' selected' : ''}>${escapeHtml(taxIdLabel(type))}</option>`,
    ).join('');
    // Required where the country chosen above has a kind of tax ID (the script decides as it
    // changes), else behind the box as when optional; required outright without an address.
    const byCountry = ask.taxId === 'required' && ask.address !== false;
    const required = ask.taxId === 'required' && !byCountry;
    const box = `<label class="check" id="business-choice"><input type="checkbox" id="business"> I'm buying as a business</label>`;
    html += `<fieldset id="billing-tax"><legend>Tax ID</legend>
${required ? '' : `${box}\n`}${byCountry ? '<p id="tax-id-needed" hidden>A business in this country gives its tax ID.</p>\n' : ''}<div id="tax-id-fields"${required ? ' data-required="1"' : ' hidden'}${byCountry ? ` data-required-in="${TAX_ID_COUNTRY_CODES.join(' ')}"` : ''}><label for="tax-id-type">Tax ID kind</label><select id="tax-id-type"${required ? ' required' : ''}>${kinds}</select>
<label for="tax-id-value">Tax ID number</label><input id="tax-id-value" maxlength="64"${required ? ' required' : ''}></div>
</fieldset>`;
  }
  return html;
}

/**
 * The page's script that reads those fields into the payment's `billing` (none when the page
 * has no billing fields), and shows the tax id's fields when the box is ticked.
 */
export const BILLING_SCRIPT = `function billingOf() {
  const billing = {};
  if (document.getElementById('billing-address')) {
    const address = {};
    for (const name of ['line1', 'line2', 'city', 'state', 'postalCode', 'country']) {
      const value = document.getElementById('billing-' + name).value.trim();
      if (value !== '') address[name] = value;
    }
    billing.address = address;
  }
  const business = document.getElementById('business');
  const taxFields = document.getElementById('tax-id-fields');
  if ((business && business.checked) || (taxFields && taxFields.dataset.required === '1'))
    billing.taxId = { type: document.getElementById('tax-id-type').value, value: document.getElementById('tax-id-value').value.trim() };
  return Object.keys(billing).length === 0 ? undefined : billing;
}
const FIELD_WORDS = { line1: 'Address line 1', line2: 'Address line 2', city: 'City', state: 'State', postalCode: 'Postal code', country: 'Country', type: 'Tax ID kind', value: 'Tax ID number', address: 'Billing address', taxId: 'Tax ID' };
function problemWords(body) {
  const first = Array.isArray(body.errors) ? body.errors[0] : undefined;
  if (first === undefined || typeof first.path !== 'string' || !first.path.startsWith('/billing')) return body.detail;
  return (FIELD_WORDS[first.path.split('/').pop()] || 'A field') + ' ' + first.message;
}
const businessBox = document.getElementById('business');
const taxIdFields = document.getElementById('tax-id-fields');
const countryChoice = document.getElementById('billing-country');
function taxIdNeeded() {
  const must = countryChoice.value !== '' && taxIdFields.dataset.requiredIn.split(' ').includes(countryChoice.value);
  taxIdFields.dataset.required = must ? '1' : '';
  // Its label is laid out by the page's style, which a hidden attribute would not overrule.
  document.getElementById('business-choice').style.display = must ? 'none' : '';
  document.getElementById('tax-id-needed').hidden = !must;
  taxIdFields.hidden = !(must || businessBox.checked);
  document.getElementById('tax-id-type').required = must;
  document.getElementById('tax-id-value').required = must;
}
if (businessBox) businessBox.addEventListener('change', () => { taxIdFields.hidden = !businessBox.checked && taxIdFields.dataset.required !== '1'; });
if (taxIdFields && taxIdFields.dataset.requiredIn && countryChoice) {
  countryChoice.addEventListener('change', taxIdNeeded);
  taxIdNeeded();
}
// The kinds of the country chosen, the first of them picked (Germany: EU VAT; Canada: its two);
// every kind where the country has none taken here, or none is chosen yet.
const kindChoice = document.getElementById('tax-id-type');
function kindsOfCountry() {
  const options = Array.from(kindChoice.options);
  const fits = options.filter((o) => countryChoice.value !== '' && o.dataset.countries.split(' ').includes(countryChoice.value));
  for (const o of options) {
    const offered = fits.length === 0 || fits.includes(o);
    o.hidden = !offered;
    o.disabled = !offered;
  }
  if (fits.length > 0 && !fits.includes(kindChoice.options[kindChoice.selectedIndex])) kindChoice.value = fits[0].value;
}
if (kindChoice && countryChoice) {
  countryChoice.addEventListener('change', kindsOfCountry);
  kindsOfCountry();
}`;
