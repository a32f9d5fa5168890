import type { Logger } from '@mcp-meter/contracts/kit';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { UnavailableError } from '../../errors';
import { lockNextDraftable } from './repository';
import type { PurchaseRow } from './service';

/**
 * Drafts of the usage invoices still waiting to close: periods that have ended but are inside
 * the lateness allowance (or whose usage bus has not settled). Each scheduler pass recounts them,
 * so a provider sees the invoice forming and the records that arrive late in it; the period's
 * close finalizes the same invoice. One purchase at a time (`recount`, in a transaction of its
 * own), in id order, skipping those another replica holds. A draft that cannot be recounted is
 * logged and left as it was, and the pass goes on past it: one provider's broken purchase holds
 * up no one else's preview. The usage store away ends the pass (every draft would fail alike),
 * as does a failure before a purchase was taken. Answers how many drafts were recounted.
 */
export async function refreshDrafts(
  pool: Pool,
  pass: { now: () => Date; closedBy: Date; clockId: string | null; limit: number; logger: Logger },
  recount: (tx: PoolClient, row: PurchaseRow) => Promise<void>,
): Promise<number> {
  let after = '';
  let handled = 0;
  for (let taken = 0; taken < pass.limit; taken++) {
    const row: { id?: string } = {};
    try {
      const next = await inTransaction(pool, async (tx) => {
        const due = await lockNextDraftable(tx, {
          now: pass.now(),
          closedBy: pass.closedBy,
          clockId: pass.clockId,
          after,
        });
        if (due === undefined) return undefined;
        row.id = due.id;
        await recount(tx, due);
        return due.id;
      });
      if (next === undefined) break;
      after = next;
      handled++;
    } catch (error) {
      if (row.id === undefined || error instanceof UnavailableError) throw error;
      pass.logger.warn({ err: error, purchase: row.id }, 'draft invoice not refreshed in this pass');
      after = row.id;
    }
  }
  return handled;
}
