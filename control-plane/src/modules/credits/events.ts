import type { PoolClient } from '../../db/pool';
import type { AuthContext } from '../../tenancy';
import { writeEvent } from '../events/outbox';
import { type CreditKind, lowBalanceThreshold } from './repository';

/**
 * The webhook events of credit movements, shared by the credits service (top-ups, grants,
 * debits, adjustments) and the usage debits, which the service drives: a file of its own, so
 * neither imports the other back.
 */
type Kind = CreditKind;

const EVENT: Record<Kind, string> = {
  top_up: 'customer.credit.topped_up',
  grant: 'customer.credit.granted',
  debit: 'customer.credit.debited',
  usage: 'customer.credit.debited',
  adjustment: 'customer.credit.adjusted',
};

/**
 * The events of one movement, in its transaction: `customer.credit.<kind>` always, then
 * `low_balance` when the balance drops below the provider's threshold and `exhausted` when it
 * reaches zero (or, by usage, below), each once per crossing.
 */
export async function writeCreditEvents(
  tx: PoolClient,
  auth: Pick<AuthContext, 'providerId' | 'environment'>,
  movement: {
    kind: Kind;
    customerId: string;
    before: number;
    after: number;
    productRef: string | null;
    at: Date;
    idempotencyKey: string | null;
    extra?: Record<string, unknown>;
  },
): Promise<void> {
  const { before, after, at, idempotencyKey } = movement;
  const object = {
    customerId: movement.customerId,
    providerId: auth.providerId,
    credits: after,
    amount: after - before,
    productRef: movement.productRef,
    ...movement.extra,
  };
  await writeEvent(tx, { ...auth, type: EVENT[movement.kind], object, at, idempotencyKey });
  const threshold = await lowBalanceThreshold(tx, auth.providerId);
  if (before >= threshold && after < threshold) {
    await writeEvent(tx, { ...auth, type: 'customer.credit.low_balance', object, at, idempotencyKey });
  }
  if (before > 0 && after <= 0) {
    await writeEvent(tx, { ...auth, type: 'customer.credit.exhausted', object, at, idempotencyKey });
  }
}
