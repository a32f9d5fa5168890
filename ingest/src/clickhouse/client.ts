import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { type ClickHouseClient, createClient } from '@clickhouse/client';
import { DATABASE_NAME } from '@mcp-meter/contracts/usage';
import { createChdbConnection } from 'chdb/connection';

export type { ClickHouseClient };

type ClientConnection = NonNullable<NonNullable<Parameters<typeof createClient>[0]>['connection']>;

export interface ClickHouseTarget {
  /** A ClickHouse server over HTTP; when absent, chdb runs in-process on `chdbPath`. */
  url?: string | undefined;
  user?: string | undefined;
  password?: string | undefined;
  chdbPath: string;
  database: string;
}

export { DATABASE_NAME };

/** One INSERT of rows already written as TabSeparated text, with settings for this insert only. */
export interface TextInsert {
  table: string;
  columns: [string, ...string[]];
  body: Buffer;
  settings: Record<string, string>;
}

export interface ClickHouse {
  client: ClickHouseClient;
  /** Sends the rows' bytes as they are: over HTTP as the request body, to chdb without a copy. */
  insertText(insert: TextInsert): Promise<void>;
}

/**
 * chdb binds one data directory per process and aborts if a connection closes mid-query, so
 * each process shares one client (see architecture.md).
 */
export function createClickHouse(target: ClickHouseTarget): ClickHouse {
  if (target.url !== undefined) {
    const client = createClient({
      url: target.url,
      username: target.user ?? 'default',
      password: target.password ?? '',
      request_timeout: 30_000,
    });
    return {
      client,
      insertText: async (insert) => {
        await client.insert({
          table: insert.table,
          // A byte stream: the client refuses an object-mode stream (Readable.from's default) for a text format.
          values: Readable.from([insert.body], { objectMode: false }),
          format: 'TabSeparated',
          columns: insert.columns,
          clickhouse_settings: insert.settings,
        });
      },
    };
  }
  const chdb = createChdbConnection({ path: target.chdbPath });
  // chdb types its connection against its own copy of @clickhouse/client-common; the shapes are
  // the same at runtime, so the cast only bridges the two declaration copies.
  const client = createClient({ connection: chdb as unknown as ClientConnection });
  return {
    client,
    // chdb's own insert takes the Buffer without copying it into a query string, and puts the
    // settings in the statement, where the client's path would SET them on chdb's one session
    // (so they would stay set for every later query).
    insertText: async (insert) => {
      await chdb.chdb.rawInsert({
        table: insert.table,
        values: insert.body,
        format: 'TabSeparated',
        columns: insert.columns,
        settings: insert.settings,
      });
    },
  };
}

const MIGRATIONS_DIR = join(import.meta.dirname, 'migrations');
const CLUSTER_MIGRATIONS_DIR = join(import.meta.dirname, 'cluster');

/**
 * Applies the versioned DDL: migrations/ on one server, cluster/ (replicated and distributed
 * tables, every statement ON CLUSTER) when `cluster` names one. The applied versions are
 * recorded and skipped at the next start; every statement is idempotent (IF NOT EXISTS) all the
 * same, so a start that stopped halfway through a file runs it again safely.
 */
export async function migrateClickHouse(
  client: ClickHouseClient,
  database: string,
  cluster?: string,
): Promise<string[]> {
  if (!DATABASE_NAME.test(database)) throw new Error(`invalid ClickHouse database name: ${database}`);
  if (cluster !== undefined && !DATABASE_NAME.test(cluster))
    throw new Error(`invalid ClickHouse cluster name: ${cluster}`);
  const onCluster = cluster === undefined ? '' : ` ON CLUSTER '${cluster}'`;
  await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}${onCluster}` });
  await client.command({
    query: `CREATE TABLE IF NOT EXISTS ${database}.schema_migrations${onCluster}
            (version String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3))
            ENGINE = ReplacingMergeTree ORDER BY version`,
  });
  const files = await migrationFiles(database, cluster);
  const applied = new Set(
    (
      await (
        await client.query({
          query: `SELECT version FROM ${database}.schema_migrations`,
          format: 'JSONEachRow',
        })
      ).json<{ version: string }>()
    ).map((row) => row.version),
  );
  for (const [file, sql] of files) {
    const version = cluster === undefined ? file : `cluster/${file}`;
    // A file applied before is not run again: its statements are idempotent, but some (an index
    // materialised over stored rows) are work worth doing once.
    if (applied.has(version)) continue;
    for (const statement of splitStatements(sql)) await client.command({ query: statement });
    await client.insert({
      table: `${database}.schema_migrations`,
      values: [{ version }],
      format: 'JSONEachRow',
    });
  }
  return files.map(([file]) => file);
}

/** The migration files for one server or a cluster, in order, with their placeholders filled in. */
async function migrationFiles(
  database: string,
  cluster: string | undefined,
): Promise<Array<[string, string]>> {
  const dir = cluster === undefined ? MIGRATIONS_DIR : CLUSTER_MIGRATIONS_DIR;
  const names = (await readdir(dir)).filter((f) => /^\d{3}_.+\.sql$/.test(f)).sort();
  return Promise.all(
    names.map(async (name): Promise<[string, string]> => {
      const sql = await readFile(join(dir, name), 'utf8');
      return [name, sql.replaceAll('{database}', database).replaceAll('{cluster}', cluster ?? '')];
    }),
  );
}

/** The statements of a migration file, its comment lines left out. */
export function splitStatements(sql: string): string[] {
  return sql
    .split('\n')
    .filter((line) => !line.trim().startsWith('--'))
    .join('\n')
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
}
