import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestControlPlane } from '../../test/helpers/control-plane';
import { root } from '../../test/helpers/processes';
import { startService } from './service';

const run = promisify(execFile);

/**
 * The SDK as a provider gets it: built (`npm run sdk:build`), packed with `npm pack`, installed
 * with npm into a project outside this repository, type-checked there under NodeNext, and run
 * with plain Node against the service.
 */
describe('the published SDK package', () => {
  let harness: TestControlPlane;
  let url: string;
  let project: string;

  beforeAll(async () => {
    ({ harness, url } = await startService());
    project = mkdtempSync(join(tmpdir(), 'sdk-consumer-'));
  });
  afterAll(async () => {
    await harness?.close();
    if (project !== undefined) rmSync(project, { recursive: true, force: true });
  });

  it('installs with npm and works from plain Node and TypeScript', async () => {
    await run(process.execPath, [join(root, 'sdk', 'build.mjs')], { cwd: root });
    await run('npm', ['pack', join(root, 'sdk', 'dist'), '--pack-destination', project], { cwd: project });
    const tarball = readdirSync(project).find((f) => f.endsWith('.tgz'));
    expect(tarball).toMatch(/^mcp-meter-sdk-\d+\.\d+\.\d+\.tgz$/);
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
    );
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', `./${tarball}`], {
      cwd: project,
      timeout: 180_000,
    });

    writeFileSync(
      join(project, 'consumer.ts'),
      `import { createMeter, MeterApiError, orThrow } from '@mcp-meter/sdk';
import { verifyWebhook } from '@mcp-meter/sdk/webhooks';
const meter = createMeter({ apiKey: process.env.KEY ?? '', baseUrl: process.env.URL });
const customer = await orThrow(meter.POST('/v1/sdk/customers', { body: { externalRef: 'packaged' } }));
const reference: string = customer.reference;
const missing = await orThrow(meter.GET('/v1/sdk/customers/{ref}', { params: { path: { ref: 'nobody' } } })).catch(
  (error: unknown) => (error instanceof MeterApiError ? error.code : 'other'),
);
console.log(JSON.stringify({ reference, missing, verify: typeof verifyWebhook }));
`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2023',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: false,
          outDir: 'out',
          typeRoots: [join(root, 'node_modules', '@types')],
          types: ['node'],
        },
        files: ['consumer.ts'],
      }),
    );
    // Type-checked and compiled as a provider's project would be (the SDK's own types, NodeNext).
    await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], {
      cwd: project,
    });
    const key = (await harness.controlPlane.providers.create({ displayName: 'Packaged' })).sandboxKey;
    const { stdout } = await run(process.execPath, [join(project, 'out', 'consumer.js')], {
      cwd: project,
      env: { ...process.env, KEY: key, URL: url },
    });
    expect(JSON.parse(stdout)).toMatchObject({
      reference: expect.stringMatching(/^cus_/),
      missing: 'customer_not_found',
      verify: 'function',
    });
  });
});
