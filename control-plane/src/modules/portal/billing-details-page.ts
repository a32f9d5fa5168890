import { countries, TAX_ID_TYPES, taxIdKindOf, taxIdLabel } from '@mcp-meter/contracts/billing-details';
import type { Address, StoredTaxId } from '../../billing-details';
import { escapeHtml } from '../../http/html';

/** Every ISO 3166-1 country, by English name, for the address form's list. */
const COUNTRIES = countries();

/**
 * The billing address and tax ids the customer's invoices name them by, and the forms that
 * change them; `csrf` is the hidden field every form of the portal carries.
 */
export function renderBillingDetails(
  customer: { address: Address | null; taxIds: StoredTaxId[] },
  csrf: string,
): string {
  const a = customer.address;
  const field = (name: keyof Address, label: string, autocomplete: string, max: number) =>
    `<label for="address-${name}">${label}</label><input id="address-${name}" name="${name}" autocomplete="${autocomplete}" maxlength="${max}" value="${escapeHtml(a?.[name] ?? '')}">`;
  const options = COUNTRIES.map(
    ({ code, name }) =>
      `<option value="${code}"${a?.country === code ? ' selected' : ''}>${escapeHtml(name)}</option>`,
  ).join('');
  const taxIds =
    customer.taxIds.length === 0
      ? '<p>No tax ID.</p>'
      : `<ul id="tax-ids">${customer.taxIds
          .map((taxId) => {
            const text = `${taxIdLabel(taxId.type)} ${taxId.value}`;
            // What the tax registry answered, once the processor asked it (docs/billing.md).
            const status = taxId.verification?.status;
            const found =
              status === 'verified'
                ? ' (verified in the tax registry)'
                : status === 'unverified'
                  ? ' (not found in the tax registry)'
                  : '';
            return `<li>${escapeHtml(text)}${found} <form method="post" action="/portal/tax-ids/remove" class="inline">${csrf}<input type="hidden" name="type" value="${escapeHtml(taxId.type)}"><input type="hidden" name="value" value="${escapeHtml(taxId.value)}"><button class="plain" type="submit" aria-label="Remove: ${escapeHtml(text)}">Remove</button></form></li>`;
          })
          .join('')}</ul>`;
  // The kind of the billing address's country comes picked (New Zealand: NZ GST).
  const picked = taxIdKindOf(a?.country);
  const kinds = TAX_ID_TYPES.map(
    (type) =>
      `<option value="${type}"${type === picked ? ' selected' : ''}>${escapeHtml(taxIdLabel(type))}</option>`,
  ).join('');
  return `<h3>Billing address</h3>
<p class="fine">Your invoices are addressed here.</p>
<form method="post" action="/portal/address">${csrf}
${field('line1', 'Address line 1', 'address-line1', 200)}
${field('line2', 'Address line 2', 'address-line2', 200)}
${field('city', 'City', 'address-level2', 100)}
${field('state', 'State, county or region', 'address-level1', 100)}
${field('postalCode', 'Postal code', 'postal-code', 20)}
<label for="address-country">Country</label><select id="address-country" name="country" autocomplete="country"><option value="">None</option>${options}</select>
<div><button type="submit">Save address</button></div></form>
<h3>Tax IDs</h3>
<p class="fine">Your invoices name you by these (a VAT number, say).</p>
${taxIds}
<form method="post" action="/portal/tax-ids">${csrf}
<label for="tax-id-type">Kind</label><select id="tax-id-type" name="type">${kinds}</select>
<label for="tax-id-value">Number</label><input id="tax-id-value" name="value" maxlength="64" required>
<div><button type="submit">Add tax ID</button></div></form>`;
}
