import type { Logger } from '@mcp-meter/contracts/kit';
import { startEmbeddedPostgres } from './embedded';
import { migratePostgres } from './migrate';
import { createPool, type Pool } from './pool';

export interface Database {
  pool: Pool;
  /**
   * The connections of transactions that may call a payment processor (charges, refunds): a
   * pool of their own, so a processor that stops answering holds these and never the API's.
   */
  paymentsPool: Pool;
  /** The charge journal's two connections (payments/journal.ts). */
  journalPool: Pool;
  url: string;
  /** The migrations this open applied (none when the database was already up to date). */
  applied: string[];
  close(): Promise<void>;
}

/** DATABASE_URL when given, otherwise embedded PostgreSQL under the data directory; migrated either way. */
export async function openDatabase(options: {
  databaseUrl: string | undefined;
  dataDir: string;
  logger: Logger;
}): Promise<Database> {
  const embedded =
    options.databaseUrl === undefined
      ? await startEmbeddedPostgres({
          dataDir: options.dataDir,
          onLog: (line) => options.logger.debug({ postgres: line.trim() }),
          onNotice: (line) => options.logger.warn(line),
        })
      : undefined;
  const url = options.databaseUrl ?? embedded?.url;
  if (url === undefined) throw new Error('no database URL');
  const pool = createPool(url);
  const paymentsPool = createPool(url);
  const journalPool = createPool(url, { max: 2, askedByHolders: true });
  for (const each of [pool, paymentsPool, journalPool]) {
    each.on('error', (error: Error & { code?: string }) => {
      // 57P01: the server is shutting down (Ctrl-C reaches embedded PostgreSQL with this process):
      // the pool reconnects if it is still needed, and says so quietly.
      if (error.code === '57P01')
        return options.logger.debug('PostgreSQL closed an idle connection (shutting down)');
      options.logger.error({ code: error.code, message: error.message }, 'idle PostgreSQL client failed');
    });
  }
  const applied = await migratePostgres(pool);
  if (applied.length > 0) options.logger.info({ applied }, 'PostgreSQL migrations applied');
  return {
    pool,
    paymentsPool,
    journalPool,
    url,
    applied,
    close: async () => {
      await Promise.all([pool.end(), paymentsPool.end(), journalPool.end()]);
      await embedded?.stop();
    },
  };
}
