import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { root } from '../../test/helpers/processes';
import { OPERATION_DESCRIPTIONS } from '../src/http/operation-docs';
import { OPERATION_IDS } from '../src/http/operation-ids';
import { PROXY_OPERATION_IDS } from '../src/http/proxy-paths';

interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  responses?: Record<
    string,
    { content?: Record<string, { schema?: { properties?: Record<string, unknown> } }> }
  >;
}
interface Document {
  servers?: Array<{ url: string }>;
  paths: Record<string, Record<string, Operation>>;
}

const METHODS = new Set(['get', 'post', 'put', 'patch', 'delete']);

/**
 * What Redocly's recommended rules may still report, and why (issue 60). Each entry is a JSON
 * pointer into /openapi.json; anything else it reports fails the test.
 */
const EXEMPT: Record<string, string[]> = {
  // Documents that answer every request with themselves (two RFC 8414 metadata documents, the
  // key set) and the health check (200 or 503): no 4xx exists for them.
  'operation-4xx-response': [
    '#/paths/~1.well-known~1oauth-authorization-server/get/responses',
    '#/paths/~1.well-known~1openid-configuration/get/responses',
    '#/paths/~1.well-known~1jwks.json/get/responses',
    '#/paths/~1healthz/get/responses',
  ],
  // Under which license the API is offered is the owner's decision, not yet taken.
  'info-license': ['#/info'],
};

describe('the OpenAPI document', () => {
  let harness: TestControlPlane;
  let spec: Document;

  beforeAll(async () => {
    harness = await startTestControlPlane({ bodyLimitBytes: 64 * 1024 });
    const answer = await harness.controlPlane.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(answer.statusCode).toBe(200);
    spec = answer.json() as Document;
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('gives every operation its own stable operationId, and names its server', () => {
    const operations = Object.entries(spec.paths).flatMap(([path, methods]) =>
      Object.entries(methods)
        .filter(([method]) => METHODS.has(method))
        .map(([method, operation]) => ({
          route: `${method.toUpperCase()} ${path}`,
          id: operation.operationId,
        })),
    );
    expect(operations.filter((operation) => operation.id === undefined)).toEqual([]);
    const ids = operations.map((operation) => operation.id);
    expect(new Set(ids).size).toBe(ids.length);
    // Every name in the table is in use: a route removed takes its name with it.
    expect([...Object.values(OPERATION_IDS), ...PROXY_OPERATION_IDS].sort()).toEqual([...ids].sort());
    expect(spec.servers?.length).toBeGreaterThan(0);
  });

  it('names the scheme each route family takes: API keys, customer tokens, or none', () => {
    const schemes = (path: string, method: string) =>
      JSON.stringify(
        (spec.paths[path]?.[method] as { security?: unknown } | undefined)?.security ?? 'default',
      );
    // The API's own routes take the provider's secret key (the document's default).
    expect(schemes('/v1/sdk/customers', 'post')).toBe('"default"');
    expect(JSON.stringify((spec as { security?: unknown }).security)).toBe(
      '[{"bearerAuth":[]},{"consoleSession":[]}]',
    );
    // The console's own session routes take its cookie; its sign-in takes nothing.
    expect(schemes('/v1/console/session', 'get')).toBe('[{"consoleSession":[]}]');
    expect(schemes('/v1/console/sessions', 'post')).toBe('[]');
    // Sign-in, discovery, keys and health take none; the proxy a customer token.
    for (const [path, method] of [
      ['/v1/customer/auth/token', 'post'],
      ['/.well-known/oauth-authorization-server', 'get'],
      ['/.well-known/jwks.json', 'get'],
      ['/healthz', 'get'],
      ['/.well-known/oauth-protected-resource/mcp/{subdomain}', 'get'],
    ] as const)
      expect(schemes(path, method), path).toBe('[]');
    expect(schemes('/mcp/{subdomain}', 'post')).toBe('[{"customerToken":[]}]');
  });

  it('describes every operation beyond its summary, from its route or the descriptions table', () => {
    const bare: string[] = [];
    for (const [path, methods] of Object.entries(spec.paths))
      for (const [method, operation] of Object.entries(methods)) {
        if (!METHODS.has(method)) continue;
        const { summary, description } = operation;
        if (
          summary === undefined ||
          description === undefined ||
          description.length < 40 ||
          description === summary
        )
          bare.push(`${method.toUpperCase()} ${path}`);
      }
    expect(bare).toEqual([]);
    // Every entry of the table names a route that uses it (not one gone, nor one with its own).
    const routes = new Set(Object.keys(OPERATION_IDS));
    for (const key of Object.keys(OPERATION_DESCRIPTIONS)) expect(routes.has(key), key).toBe(true);
    const described = Object.values(spec.paths).flatMap((methods) =>
      Object.values(methods).map((operation) => operation.description),
    );
    for (const [key, text] of Object.entries(OPERATION_DESCRIPTIONS))
      expect(described.includes(text), `${key}: its route has its own description`).toBe(true);
  });

  it('declares problems as application/problem+json, as they are sent, and 503 where a dependency is behind', () => {
    const asJson: string[] = [];
    let problems = 0;
    let unavailable = 0;
    for (const [path, methods] of Object.entries(spec.paths))
      for (const [method, operation] of Object.entries(methods)) {
        if (!METHODS.has(method)) continue;
        const responses = operation.responses ?? {};
        for (const [status, response] of Object.entries(responses)) {
          if (Number(status) < 400) continue;
          const properties = response.content?.['application/json']?.schema?.properties ?? {};
          if ('code' in properties && 'title' in properties) asJson.push(`${method} ${path} ${status}`);
          if (response.content?.['application/problem+json'] !== undefined) problems++;
        }
        if (responses['401']?.content?.['application/problem+json'] !== undefined) {
          expect(responses['503']?.content?.['application/problem+json'], `${method} ${path}`).toBeDefined();
          unavailable++;
        }
      }
    expect(asJson).toEqual([]);
    expect(problems).toBeGreaterThan(200);
    expect(unavailable).toBeGreaterThan(80);
  });

  it("passes Redocly's recommended rules, with no error and no warning but the exempt ones", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcpmeter-openapi-'));
    try {
      writeFileSync(join(dir, 'openapi.json'), JSON.stringify(spec));
      const ignore = Object.entries(EXEMPT)
        .map(([rule, pointers]) => `  ${rule}:\n${pointers.map((p) => `    - '${p}'`).join('\n')}`)
        .join('\n');
      writeFileSync(join(dir, '.redocly.lint-ignore.yaml'), `openapi.json:\n${ignore}\n`);
      const { stdout } = await promisify(execFile)(
        join(root, 'node_modules', '.bin', 'redocly'),
        ['lint', 'openapi.json', '--format=json', '--max-problems=1000'],
        { cwd: dir, maxBuffer: 64 * 1024 * 1024 },
      ).catch((failed: { stdout?: string }) => ({ stdout: failed.stdout ?? '' }));
      const report = JSON.parse(stdout) as {
        totals: { errors: number; warnings: number; ignored: number };
        problems: Array<{ ruleId: string; message: string; location: Array<{ pointer: string }> }>;
      };
      const reported = report.problems.map(
        (p) => `${p.ruleId} ${p.location.map((l) => l.pointer).join(' ')}: ${p.message}`,
      );
      expect(reported).toEqual([]);
      expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
      // The exemptions are all still needed: one no longer reported is taken off the list.
      expect(report.totals.ignored).toBe(Object.values(EXEMPT).flat().length);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
