import { type Answer, orThrow } from './errors.js';

/** A page of a list: the API's lists answer `{ data, nextCursor }` and take `?limit&cursor`. */
export interface Page<Item> {
  data: Item[];
  nextCursor?: string | null;
}

/**
 * Every item of a cursor-paginated list, page after page, as the caller reads them; the next
 * page is asked for only when the last one is used up. `fetchPage` asks for the page at `cursor`
 * (undefined for the first):
 *
 *   for await (const customer of paginate((cursor) =>
 *     meter.GET('/v1/sdk/customers', { params: { query: { cursor, limit: 100 } } })))
 *
 * A page answered with an error throws `MeterApiError`.
 */
export async function* paginate<Item>(
  fetchPage: (cursor: string | undefined) => Promise<Answer<Page<Item>>>,
): AsyncGenerator<Item, void, undefined> {
  let cursor: string | undefined;
  const seen = new Set<string>();
  for (;;) {
    const page = await orThrow(fetchPage(cursor));
    yield* page.data;
    const next = page.nextCursor;
    if (next === undefined || next === null || next === '') return;
    // A cursor that comes back again would loop for ever: stop rather than repeat pages.
    if (seen.has(next)) throw new Error(`the list answered cursor ${next} twice`);
    seen.add(next);
    cursor = next;
  }
}
