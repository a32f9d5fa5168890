import type { Logger } from '@mcp-meter/contracts/kit';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';

/** The row a pass's step took, as its handler tells it: the one to skip should handling fail. */
export type Took = (id: string) => void;

/**
 * One scheduler pass over the rows due now (purchases to renew, invoices to charge again), each
 * in a transaction of its own: `step` locks the next due row whose id is not in `skipped`, says
 * which it took, handles it and answers the result, or undefined when nothing is due. A row whose
 * handling fails (its provider's processor disconnected or out of reach, a row the code cannot
 * handle) is rolled back, logged and skipped for the rest of the pass; it stays due, for the next
 * pass. So one such row holds up no other provider's billing. A failure before a row was taken
 * (the database away) ends the pass. `committed` runs after each step's commit. Answers how many
 * rows were handled; `limit` bounds the rows taken, handled or skipped.
 */
export async function eachDue<T>(
  pool: Pool,
  options: { limit: number; logger: Logger; what: string },
  step: (tx: PoolClient, skipped: readonly string[], took: Took) => Promise<T | undefined>,
  committed: (result: T) => Promise<void> = async () => undefined,
): Promise<number> {
  const skipped: string[] = [];
  let handled = 0;
  while (handled + skipped.length < options.limit) {
    const taken: { id?: string } = {};
    let result: T | undefined;
    try {
      result = await inTransaction(pool, (tx) =>
        step(tx, skipped, (id) => {
          taken.id = id;
        }),
      );
    } catch (error) {
      if (taken.id === undefined) throw error;
      options.logger.error(
        { err: error, [options.what]: taken.id },
        `${options.what} not handled in this pass; the next pass tries again`,
      );
      skipped.push(taken.id);
      continue;
    }
    if (result === undefined) break;
    handled++;
    await committed(result);
  }
  return handled;
}
