import { Readable } from 'node:stream';
import { stringify } from 'csv-stringify';
import { type App, authOf } from '../../http/app';
import { errorResponses } from '../../http/schemas';
import { TransactionPage, TransactionQuery } from './schemas';
import type { TransactionService } from './service';

/** How many rows one CSV export holds at most. */
export const CSV_MAX_ROWS = 100_000;
const CSV_COLUMNS = [
  'id',
  'type',
  'amount',
  'fee',
  'net',
  'currency',
  'customerRef',
  'paymentId',
  'source',
  'description',
  'createdAt',
] as const;

export function transactionRoutes(transactions: TransactionService) {
  return async (app: App) => {
    app.get(
      '/v1/ui/transactions',
      {
        schema: {
          tags: ['financials'],
          summary:
            'List money movements (payments, refunds, fees, disputes, payouts) oldest first, or export them as CSV',
          querystring: TransactionQuery,
          response: {
            200: {
              description: 'A page of transactions, or with format=csv a CSV file',
              content: {
                'application/json': { schema: TransactionPage },
                'text/csv': { schema: { type: 'string' } },
              },
            },
            ...errorResponses,
          },
        },
      },
      async (request, reply) => {
        const auth = authOf(request);
        const { format, limit: _limit, cursor: _cursor, ...filter } = request.query;
        if (format !== 'csv') return transactions.list(auth, request.query);
        const rows = transactions.all(auth, filter, CSV_MAX_ROWS);
        // Validated before the first byte goes out, so a bad filter is still a 400.
        const first = await rows.next();
        async function* everything() {
          if (first.done !== true) yield first.value;
          yield* rows;
        }
        const csv = Readable.from(everything()).pipe(
          stringify({ header: true, columns: [...CSV_COLUMNS], cast: { boolean: (v) => String(v) } }),
        );
        return reply
          .type('text/csv; charset=utf-8')
          .header('content-disposition', 'attachment; filename="transactions.csv"')
          .send(csv);
      },
    );
  };
}
