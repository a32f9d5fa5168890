import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ProxyMetrics } from '../../proxy/src/metrics-page';

/**
 * The Prometheus rules shipped for the proxy's objectives and the usage records' guarantees
 * (deploy/prometheus/), checked by Prometheus's own promtool (test/prometheus/install.sh: `go
 * install` from the Go module proxy): the rules load and lint clean, their unit tests pass (alerts
 * fire on a fast and a slow burn, summed over workers, and stay quiet within the objective), and
 * every series they read is one the proxy's metrics page has, so no rule waits on a name that
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

/** A proxy's metrics page with every part present (counters at zero). */
function proxyPage(): string {
  const metrics = new ProxyMetrics();
  const page = metrics.render({
    gatekeeper: { stats: { decisions: { admitted: 0 }, graceUnreported: 0 } },
    limiter: { storeCommands: 0, leases: 0, waits: 0 },
    directory: { reads: 0 },
    link: { requests: 0 },
    emitter: {
      stats: () => ({
        emitted: 0,
        published: 0,
        retried: 0,
        spilled: 0,
        replayed: 0,
        dropped: 0,
        spooled: 0,
        spoolFailures: 0,
        queued: 0,
      }),
    },
    inflight: 0,
  } as unknown as Parameters<ProxyMetrics['render']>[0]);
  metrics.close();
  return page;
}

/** The names of the series on a proxy's metrics page. */
function pageSeries(): Set<string> {
  const names = new Set<string>();
  for (const line of proxyPage().split('\n'))
    if (line !== '' && !line.startsWith('#')) names.add(line.slice(0, line.search(/[{ ]/)));
  return names;
}

describe('the Prometheus rules', () => {
  it('load and lint clean (promtool check rules)', async () => {
    const { code, out } = await exec(promtool, ['check', 'rules', '--lint-fatal', rules]);
    expect(code, out).toBe(0);
    expect(out).toMatch(/SUCCESS: 18 rules found/);
  });

  it('pass their unit tests (promtool test rules)', async () => {
    const { code, out } = await exec(promtool, ['test', 'rules', 'mcpmeter-rules.test.yml']);
    expect(code, out).toBe(0);
    expect(out).toMatch(/SUCCESS/);
  });

  it("read only series the proxy's metrics page has", () => {
    const text = readFileSync(rules, 'utf8');
    const groups = (parse(text) as { groups: { rules: { expr: string }[] }[] }).groups;
    const read = new Set<string>();
    for (const group of groups)
      for (const rule of group.rules)
        for (const [name] of rule.expr.matchAll(/\bmcpmeter_[a-z_]+/g)) read.add(name);
    expect(read.size).toBeGreaterThan(4);
    const page = pageSeries();
    expect([...read].filter((name) => !page.has(name))).toEqual([]);
  });

  it("count good events at a bucket bound the proxy's histograms have", () => {
    // A threshold between bounds would match no series, and the objective would read all bad.
    const bounds = new Set<string>();
    for (const [, name, le] of readFileSync(rules, 'utf8').matchAll(
      /\b(mcpmeter_[a-z_]+_bucket)\{[^}]*le="([^"]+)"/g,
    ))
      bounds.add(`${name}{le="${le}"}`);
    expect([...bounds]).toContain('mcpmeter_proxy_added_seconds_bucket{le="0.002"}');
    const page = proxyPage();
    expect([...bounds].filter((bound) => !page.includes(`${bound} `))).toEqual([]);
  });
});
