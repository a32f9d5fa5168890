import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createLogger } from '@mcp-meter/contracts/kit';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ControlPlaneMetrics } from '../../control-plane/src/http/metrics';
import { BatchingUsageEmitter, type EmitterStats } from '../../ingest/src/emitter';
import { usageEmitterMetrics } from '../../ingest/src/emitter-metrics';
import { IngestMetrics } from '../../ingest/src/ingest-metrics';
import { ProxyMetrics } from '../../proxy/src/metrics-page';

/**
 * The Prometheus rules shipped for the proxy's objectives and the usage records' guarantees
 * (deploy/prometheus/), checked by Prometheus's own promtool (test/prometheus/install.sh: `go
 * install` from the Go module proxy): the rules load and lint clean, their unit tests pass (alerts
 * fire on a fast and a slow burn, summed over workers, and stay quiet within the objective), and
 * every series they read is one the services' metrics pages have, so no rule waits on a name that
 * never comes.
 */
const root = join(import.meta.dirname, '..', '..');
const dir = join(root, 'deploy', 'prometheus');
const rules = join(dir, 'mcpmeter-rules.yml');
const run = promisify(execFile);

let promtool: string;

beforeAll(async () => {
  const { stdout } = await run('bash', [join(root, 'test', 'prometheus', 'install.sh')], {
    timeout: 1_500_000,
  });
  promtool = stdout.trim();
}, 1_500_000);

/** A program's exit code and output, whether it failed or not. */
async function exec(file: string, args: string[]) {
  return run(file, args, { cwd: dir, maxBuffer: 16 * 1024 * 1024 }).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
  );
}

/** A fresh usage emitter's counters (all at zero), as a page reads them. */
function proxyEmitterStats(): EmitterStats {
  const publisher = { publish: async () => {}, close: async () => {} };
  return new BatchingUsageEmitter(publisher, {
    maxBatch: 1,
    lingerMs: 1,
    maxQueued: 1,
    retryDelayMs: 1,
    logger: createLogger({ level: 'silent', name: 'rules' }),
  }).stats();
}

/** A proxy's metrics page with every part present (counters at zero). */
function proxyPage(): string {
  const metrics = new ProxyMetrics();
  const page = metrics.render({
    gatekeeper: { stats: { decisions: { admitted: 0 }, graceUnreported: 0 } },
    limiter: { storeCommands: 0, leases: 0, waits: 0 },
    directory: { reads: 0 },
    link: { requests: 0 },
    emitter: { stats: proxyEmitterStats },
    inflight: 0,
  } as unknown as Parameters<ProxyMetrics['render']>[0]);
  metrics.close();
  return page;
}

/** A control plane's metrics page with every part present: its recorder's and ingest's. */
async function controlPlanePage(): Promise<string> {
  const ingest = new IngestMetrics();
  ingest.follow(() => ({ malformed: 0, read: 0, behind: 0, unwritten: 0 }));
  // The group's lag is read in the background of one scrape and shown from the next.
  ingest.followGroup(async () => 0);
  ingest.render();
  await new Promise((resolve) => setImmediate(resolve));
  const metrics = new ControlPlaneMetrics([
    () => usageEmitterMetrics(proxyEmitterStats()).join(''),
    () => ingest.render(),
  ]);
  const page = metrics.render({ sent: 0, delivered: 0, inFlight: 0 }, { due: 0, oldestDueSeconds: 0 });
  metrics.close();
  return page;
}

/** The names of the series on the services' metrics pages. */
async function pageSeries(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const line of `${proxyPage()}${await controlPlanePage()}`.split('\n')) {
    // A family with no sample yet (no GC pause seen, say) is still one its page declares.
    const declared = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (declared?.[1] !== undefined) {
      const suffixes = declared[2] === 'histogram' ? ['_bucket', '_sum', '_count'] : [''];
      for (const suffix of suffixes) names.add(`${declared[1]}${suffix}`);
    } else if (line !== '' && !line.startsWith('#')) names.add(line.slice(0, line.search(/[{ ]/)));
  }
  return names;
}

/** promtool's lint of a metrics page (names, types, help), read from its standard input. */
function lintPage(page: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = execFile(promtool, ['check', 'metrics'], (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : Number(error.code), out: stdout + stderr }),
    );
    child.stdin?.end(page);
  });
}

describe('the Prometheus rules', () => {
  it('load and lint clean (promtool check rules)', async () => {
    const { code, out } = await exec(promtool, ['check', 'rules', '--lint-fatal', rules]);
    expect(code, out).toBe(0);
    expect(out).toMatch(/SUCCESS: 36 rules found/);
  });

  it('pass their unit tests (promtool test rules)', async () => {
    const files = ['mcpmeter-rules.test.yml', 'mcpmeter-rules-control-plane.test.yml'];
    const { code, out } = await exec(promtool, ['test', 'rules', ...files]);
    expect(code, out).toBe(0);
    expect(out.match(/SUCCESS/g)).toHaveLength(files.length);
  });

  it.each([
    ['proxy', proxyPage],
    ['control plane', controlPlanePage],
  ])("the %s's metrics page lints clean (promtool check metrics)", async (_name, page) => {
    const { code, out } = await lintPage(await page());
    expect(code, out).toBe(0);
  });

  it("read only series the services' metrics pages have", async () => {
    const text = readFileSync(rules, 'utf8');
    const groups = (parse(text) as { groups: { rules: { expr: string }[] }[] }).groups;
    const read = new Set<string>();
    for (const group of groups)
      for (const rule of group.rules)
        for (const [name] of rule.expr.matchAll(/\bmcpmeter_[a-z_]+/g)) read.add(name);
    expect(read.size).toBeGreaterThan(4);
    const page = await pageSeries();
    expect([...read].filter((name) => !page.has(name))).toEqual([]);
  });

  it("count good events at a bucket bound the services' histograms have", async () => {
    // A threshold between bounds would match no series, and the objective would read all bad.
    const bounds = new Set<string>();
    for (const [, name, le] of readFileSync(rules, 'utf8').matchAll(
      /\b(mcpmeter_[a-z_]+_bucket)\{[^}]*le="([^"]+)"/g,
    ))
      bounds.add(`${name}{le="${le}"}`);
    expect([...bounds]).toContain('mcpmeter_proxy_added_seconds_bucket{le="0.002"}');
    expect([...bounds]).toContain('mcpmeter_control_plane_limit_check_seconds_bucket{le="0.025"}');
    const page = `${proxyPage()}${await controlPlanePage()}`;
    expect([...bounds].filter((bound) => !page.includes(`${bound} `))).toEqual([]);
  });
});

/** The Grafana dashboard the Helm chart ships (and self-hosters import), panel by panel. */
describe('the Grafana dashboard', () => {
  const file = join(root, 'deploy', 'helm', 'mcp-meter', 'dashboards', 'mcp-meter.json');
  const dashboard = JSON.parse(readFileSync(file, 'utf8')) as {
    uid: string;
    panels: { type: string; title: string; targets?: { expr: string; datasource: { uid: string } }[] }[];
  };
  const queries = dashboard.panels.flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({ panel: panel.title, ...target })),
  );

  it('has a query on every graph, each from the chosen Prometheus', () => {
    const graphs = dashboard.panels.filter((panel) => panel.type !== 'row');
    expect(graphs.length).toBeGreaterThan(8);
    for (const graph of graphs) expect(graph.targets?.length, graph.title).toBeGreaterThan(0);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable, not JavaScript's
    for (const query of queries) expect(query.datasource.uid).toBe('${datasource}');
  });

  it("queries are PromQL promtool reads, over series the services' pages have or the rules record", async () => {
    // Grafana fills $__rate_interval in; promtool reads each query as a recording rule's.
    const dir = mkdtempSync(join(tmpdir(), 'mcpmeter-dashboard-'));
    try {
      const rulesFile = join(dir, 'queries.yml');
      const lines = ['groups:', '  - name: dashboard', '    rules:'];
      queries.forEach((query, i) => {
        lines.push(
          `      - record: dashboard:query_${i}`,
          `        expr: ${JSON.stringify(query.expr.replaceAll('$__rate_interval', '5m'))}`,
        );
      });
      writeFileSync(rulesFile, `${lines.join('\n')}\n`);
      const { code, out } = await exec(promtool, ['check', 'rules', rulesFile]);
      expect(code, out).toBe(0);
      expect(out).toContain(`SUCCESS: ${queries.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const page = await pageSeries();
    const recorded = new Set(
      [...readFileSync(rules, 'utf8').matchAll(/- record: (\S+)/g)].map(([, name]) => name as string),
    );
    const unknown: string[] = [];
    for (const query of queries) {
      for (const [name] of query.expr.matchAll(/\bmcpmeter_[a-z_]+/g))
        if (!page.has(name)) unknown.push(name);
      for (const [name] of query.expr.matchAll(/\bmcpmeter:[a-z_:0-9]+/g))
        if (!recorded.has(name)) unknown.push(name);
    }
    expect(unknown).toEqual([]);
  });
});
