import type { Queryable } from '../../db/pool';
import { NotFoundError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findCustomer } from './repository';

/**
 * A list's `customerRef` filter as the customer's id: undefined when none was asked for, 404
 * `customer_not_found` when the one named is not the tenant's (a filter never silently lists
 * nothing for a typo).
 */
export async function customerFilter(
  db: Queryable,
  auth: AuthContext,
  customerRef: string | undefined,
): Promise<string | undefined> {
  if (customerRef === undefined) return undefined;
  const customer = await findCustomer(db, auth, customerRef);
  if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
  return customer.id;
}
