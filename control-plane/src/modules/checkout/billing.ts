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
}

const MAX_TAX_IDS = TaxIdsInput.maxItems ?? 5;

/** The parts a required billing address must have (a postal code is not used everywhere). */
const REQUIRED_PARTS = ['line1', 'city', 'country'] as const satisfies ReadonlyArray<keyof Address>;

/**
 * The change a payment makes to its customer's billing details, from what the page sent: the
 * address given (every part it has; a `required` session refuses one without a street, city and
 * country), and the tax id given, added unless the customer has it already. Only what the
 * session asks is taken: anything else is a 400 naming it, as is a malformed part.
 * `fromProcessor`: the processor's own page collected the address and enforced it.
 */
export function billingChange(
  row: Pick<SessionRow, 'billing_address_collection' | 'tax_id_collection'>,
  billing: BillingInput | undefined,
  fromProcessor = false,
): ((current: Customer) => CustomerUpdate) | undefined {
  const problems: DetailProblem[] = [];
  const required = row.billing_address_collection === 'required';
  let address: Address | undefined;
  if (billing?.address !== undefined) {
    if (!required) problems.push({ path: '/billing/address', message: 'is not asked by this checkout' });
    else address = normalizeAddress(billing.address, '/billing/address', problems);
  }
  if (required && !fromProcessor)
    for (const part of REQUIRED_PARTS)
      if ((address?.[part] ?? null) === null)
        problems.push({ path: `/billing/address/${part}`, message: 'is required' });
  let taxId: TaxId | undefined;
  if (billing?.taxId !== undefined) {
    if (!row.tax_id_collection)
      problems.push({ path: '/billing/taxId', message: 'is not asked by this checkout' });
    else taxId = normalizeTaxIds([billing.taxId], '/billing/taxId', problems)[0];
  }
  // What the processor's page collected was the customer's to give there: a part we cannot keep
  // (a country code we do not know) leaves the details as they were rather than refuse a payment.
  if (problems.length > 0 && fromProcessor) return undefined;
  if (problems.length > 0)
    throw new ValidationError(
      problems.map((p) => ({ ...p, path: p.path.replace('/billing/taxId/0', '/billing/taxId') })),
    );
  if (address === undefined && taxId === undefined) return undefined;
  return (current) => {
    const change: CustomerUpdate = {};
    if (address !== undefined) change.address = compact(address);
    const known =
      taxId !== undefined && current.taxIds.some((t) => t.type === taxId.type && t.value === taxId.value);
    if (taxId !== undefined && !known) {
      if (current.taxIds.length >= MAX_TAX_IDS)
        throw new ValidationError([
          {
            path: '/billing/taxId',
            message: `cannot be added: the account holds ${MAX_TAX_IDS} tax IDs already`,
          },
        ]);
      change.taxIds = [...current.taxIds, taxId];
    }
    return change;
  };
}

/** An address as the customer API takes it: the parts that are there. */
function compact(address: Address): AddressInput {
  return Object.fromEntries(Object.entries(address).filter(([, value]) => value !== null)) as AddressInput;
}
