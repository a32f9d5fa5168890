import { hasTaxIdKind } from '@mcp-meter/contracts/billing-details';
import {
  type Address,
  type AddressInput,
  type DetailProblem,
  normalizeAddress,
  normalizeTaxIds,
  type TaxId,
  TaxIdsInput,
} from '../../billing-details';
import { ValidationError } from '../../errors';
import type { Customer, CustomerUpdate } from '../customers/schemas';
import type { SessionRow } from './repository';

/** What the customer gave on the hosted page besides a card. */
export interface BillingInput {
  address?: AddressInput | undefined;
  taxId?: TaxId | undefined;
  /** The business's legal name given with a tax ID on the processor's page (Stripe saves it as the name). */
  businessName?: string | undefined;
}

const MAX_TAX_IDS = TaxIdsInput.maxItems ?? 5;

/** The parts a required billing address must have (a postal code is not used everywhere). */
const REQUIRED_PARTS = ['line1', 'city', 'country'] as const satisfies ReadonlyArray<keyof Address>;

/**
 * The change a payment makes to its customer's billing details, from what the page sent: the
 * address given (every part it has; a `required` session refuses one without a street, city and
 * country), and the tax id given, added unless the customer has it already (a session that
 * requires one refuses a customer who has none and gave none). Only what the
 * session asks is taken: anything else is a 400 naming it, as is a malformed part.
 *
 * `fromProcessor`: the processor's own page collected them (Stripe Checkout), and what it sends
 * was the customer's to give there, after the card was saved: nothing is refused. What the
 * session did not ask (Stripe reports the country of any card) and a part we cannot keep (a
 * country code or tax ID type we do not know) are left out, the rest is taken; a tax ID beyond
 * the customer's five is not added; the business name given with a tax ID becomes the
 * customer's name, as Stripe makes it its customer's.
 */
export function billingChange(
  row: Pick<SessionRow, 'billing_address_collection' | 'tax_id_collection' | 'tax_id_required'>,
  billing: BillingInput | undefined,
  fromProcessor = false,
): ((current: Customer) => CustomerUpdate) | undefined {
  const problems: DetailProblem[] = [];
  const required = row.billing_address_collection === 'required';
  const take = <T>(read: (found: DetailProblem[]) => T): T | undefined => {
    const found: DetailProblem[] = [];
    const value = read(found);
    if (found.length === 0 || !fromProcessor) {
      problems.push(...found);
      return value;
    }
    return undefined;
  };
  let address: Address | undefined;
  if (billing?.address !== undefined) {
    if (required)
      address = take((found) => normalizeAddress(billing.address as AddressInput, '/billing/address', found));
    else if (!fromProcessor)
      problems.push({ path: '/billing/address', message: 'is not asked by this checkout' });
  }
  if (required && !fromProcessor)
    for (const part of REQUIRED_PARTS)
      if ((address?.[part] ?? null) === null)
        problems.push({ path: `/billing/address/${part}`, message: 'is required' });
  let taxId: TaxId | undefined;
  if (billing?.taxId !== undefined) {
    if (row.tax_id_collection)
      taxId = take((found) => normalizeTaxIds([billing.taxId as TaxId], '/billing/taxId', found)[0]);
    else if (!fromProcessor)
      problems.push({ path: '/billing/taxId', message: 'is not asked by this checkout' });
  }
  const name = fromProcessor && taxId !== undefined ? billing?.businessName : undefined;
  if (problems.length > 0)
    throw new ValidationError(
      problems.map((p) => ({ ...p, path: p.path.replace('/billing/taxId/0', '/billing/taxId') })),
    );
  // A session that requires a tax id takes the payment of a customer who has one already.
  const mustHaveTaxId = row.tax_id_required && !fromProcessor && taxId === undefined;
  if (address === undefined && taxId === undefined && !mustHaveTaxId) return undefined;
  return (current) => {
    // Required "if supported": where the customer's country has a kind of tax ID (or is not known).
    const country = address?.country ?? current.address?.country ?? null;
    if (mustHaveTaxId && current.taxIds.length === 0 && (country === null || hasTaxIdKind(country)))
      throw new ValidationError([
        {
          path: '/billing/taxId',
          message: `is required${country === null ? '' : ` for a business in ${country}`}`,
        },
      ]);
    const change: CustomerUpdate = {};
    if (address !== undefined) change.address = compact(address);
    if (name !== undefined && name !== current.name) change.name = name;
    const known =
      taxId !== undefined && current.taxIds.some((t) => t.type === taxId.type && t.value === taxId.value);
    if (taxId !== undefined && !known) {
      if (current.taxIds.length < MAX_TAX_IDS) change.taxIds = [...current.taxIds, taxId];
      else if (!fromProcessor)
        throw new ValidationError([
          {
            path: '/billing/taxId',
            message: `cannot be added: the account holds ${MAX_TAX_IDS} tax IDs already`,
          },
        ]);
    }
    return change;
  };
}

/** An address as the customer API takes it: the parts that are there. */
function compact(address: Address): AddressInput {
  return Object.fromEntries(Object.entries(address).filter(([, value]) => value !== null)) as AddressInput;
}

/**
 * Whether a checkout requiring a tax ID "if supported" asks one of a customer at `address`: where
 * their country has a kind of tax ID, or no country is known; always when the page asks the
 * address, where the country chosen there decides (billing-fields.ts).
 */
export const asksTaxId = (pageAsksAddress: boolean, address: { country: string | null } | null | undefined) =>
  pageAsksAddress || address?.country == null || hasTaxIdKind(address.country);
