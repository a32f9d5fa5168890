import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClickHouseClient } from '@clickhouse/client';
import { readEnv } from '@mcp-meter/contracts/kit';
import { readClickHouseConfig } from '@mcp-meter/contracts/usage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestUsageStore } from '../../test/helpers/usage-store';
import { migrateClickHouse, splitStatements } from '../src/clickhouse/client';

/**
 * The cluster DDL (ingest/src/clickhouse/cluster/, CLICKHOUSE_CLUSTER), checked as far as one
 * machine without a ClickHouse cluster allows: chdb parses every statement, the tables keep the
 * single-server DDL's columns, sorting key and partitioning, and every statement is ON CLUSTER.
 * Replication, distribution and deduplication across shards cannot run here (no Keeper, no
 * second server): docs/self-hosting.md says so.
 */
const dir = join(import.meta.dirname, '..', 'src', 'clickhouse');
const fill = (sql: string) => sql.replaceAll('{database}', 'mcpmeter').replaceAll('{cluster}', 'main');
const single = fill(readFileSync(join(dir, 'migrations', '001_usage_records.sql'), 'utf8'));
const cluster = fill(readFileSync(join(dir, 'cluster', '001_usage_records.sql'), 'utf8'));

let store: Awaited<ReturnType<typeof openTestUsageStore>>;
beforeAll(async () => {
  store = await openTestUsageStore('cluster-ddl');
});
afterAll(() => store?.close());

/** chdb's syntax tree of `statement` (EXPLAIN AST parses without running). */
async function ast(statement: string): Promise<string> {
  const answer = await store.client.query({ query: `EXPLAIN AST ${statement}`, format: 'TabSeparatedRaw' });
  return answer.text();
}

describe('the ClickHouse cluster DDL', () => {
  it('parses, statement by statement, in ClickHouse (chdb)', async () => {
    const statements = splitStatements(cluster);
    expect(statements).toHaveLength(4);
    for (const statement of statements) {
      expect(statement).toContain("ON CLUSTER 'main'");
      expect(await ast(statement)).toMatch(/^"?CreateQuery mcpmeter usage_records_/);
    }
  });

  it('keeps the single-server tables: columns, sorting key, partitioning; shards by a prefix of the key', async () => {
    const columns = (sql: string) => sql.slice(sql.indexOf('('), sql.indexOf('ENGINE')).replace(/\s+/g, ' ');
    expect(columns(splitStatements(cluster)[0] ?? '')).toBe(columns(splitStatements(single)[0] ?? ''));
    for (const clause of [
      'PARTITION BY toYYYYMM(timestamp)',
      'ORDER BY (provider_id, meter_ref, customer_ref, id)',
    ])
      expect(cluster.split(clause).length - 1, clause).toBe(2);
    // Every copy of a record (one id, so one provider and customer) goes to one shard.
    expect(cluster.split('cityHash64(provider_id, customer_ref)').length - 1).toBe(2);
    // The names the services read and write are the distributed tables.
    for (const table of ['usage_records_sandbox', 'usage_records_live'])
      expect(cluster).toMatch(
        new RegExp(
          `mcpmeter\\.${table} ON CLUSTER 'main'\\s+AS mcpmeter\\.${table}_local\\s+ENGINE = Distributed`,
        ),
      );
  });

  it('is what migrateClickHouse runs for a cluster, with its database and bookkeeping ON CLUSTER', async () => {
    // A client that records the DDL it is sent (the statements' effect needs a cluster).
    const sent: string[] = [];
    const recorder = {
      command: async ({ query }: { query: string }) => void sent.push(query.replace(/\s+/g, ' ')),
      insert: async () => undefined,
      // Nothing applied yet.
      query: async () => ({ json: async () => [] }),
    } as unknown as ClickHouseClient;
    expect(await migrateClickHouse(recorder, 'mcpmeter', 'main')).toEqual(['001_usage_records.sql']);
    expect(sent[0]).toBe("CREATE DATABASE IF NOT EXISTS mcpmeter ON CLUSTER 'main'");
    expect(sent).toHaveLength(2 + 4);
    for (const statement of sent) expect(statement).toContain("ON CLUSTER 'main'");
    await expect(migrateClickHouse(recorder, 'mcpmeter', "main' SETTINGS x")).rejects.toThrow(/cluster name/);
  });

  it('is asked for with CLICKHOUSE_CLUSTER, which needs a ClickHouse server', () => {
    const read = (env: Record<string, string>) => {
      const reader = readEnv(env);
      const config = readClickHouseConfig(reader, '/tmp');
      return { config, done: () => reader.done({}) };
    };
    expect(read({ CLICKHOUSE_URL: 'http://ch:8123', CLICKHOUSE_CLUSTER: 'main' }).config.cluster).toBe(
      'main',
    );
    expect(read({}).config.cluster).toBeUndefined();
    expect(() => read({ CLICKHOUSE_CLUSTER: 'main' }).done()).toThrow(
      /CLICKHOUSE_CLUSTER: needs CLICKHOUSE_URL/,
    );
    expect(() => read({ CLICKHOUSE_URL: 'http://ch:8123', CLICKHOUSE_CLUSTER: "a'b" }).done()).toThrow(
      /CLICKHOUSE_CLUSTER: not a valid cluster name/,
    );
  });
});
