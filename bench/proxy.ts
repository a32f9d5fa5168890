/**
 * Proxy benchmark (issue 28): what a metered tool call costs, against peers measured in the same
 * run on the same machine, with load generators that cost little (wrk: closed model, maximum
 * throughput; vegeta: open model, latency at a fixed arrival rate). Targets:
 *   B1  origin directly (a trivial MCP origin answering at once)
 *   N   nginx proxy_pass with upstream keep-alive → origin: the cost of a good reverse proxy
 *   BP  bare uWebSockets.js + undici hop → origin: the floor of a Node hop on our packages
 *   BPn BP with a lean HTTP/1.1 keep-alive client over net instead of undici (a bench prototype)
 *   B2  proxy, metering off (token check, routing, gating, cached limit check) → origin
 *   B3  proxy, full path (B2 + a usage record per call: Kafka → ingest → ClickHouse) → origin
 *   B3m B3 with MCP 2026-07-28 calls
 *   A   the all-in-one service (`npm start`: proxy, control plane, ingest and chdb in one process)
 *
 *   npm run bench:proxy                  # the whole method, written to bench/results/proxy.{md,json,svg}
 *   npm run bench:proxy -- --cpu-only    # CPU per call of every process at saturation, printed only
 *   npm run bench:proxy -- --cpu-only --hold-seconds 600   # and the stack kept up for profiling
 *
 * Starts PostgreSQL, Redis and Kafka on free loopback ports (deploy/infra.sh), the services, the
 * origin and nginx, installs wrk, vegeta and nginx if missing (bench/load/install.sh), sends
 * traffic only to 127.0.0.1, and stops by itself.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  createWriteStream,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { get as httpGet } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '@mcp-meter/contracts/kit';
import { Redis } from 'ioredis';
import { NODE_FLAGS } from '../deploy/node-flags';
import { flame } from './load/flame';

const root = resolve(import.meta.dirname, '..');
const { values: args } = parseArgs({
  options: {
    'trial-seconds': { type: 'string', default: '5' },
    // Five by default; one with --cpu-only unless given.
    rounds: { type: 'string' },
    connections: { type: 'string', default: '32' },
    // 10 s at 5,800 calls/s is 58,000 calls a trial (58 beyond the p99.9); longer trials would
    // take the run past 15 minutes on a fresh machine, where the tools are installed first.
    'latency-seconds': { type: 'string', default: '10' },
    'cpu-only': { type: 'boolean', default: false },
    'hold-seconds': { type: 'string', default: '0' },
    'report-only': { type: 'boolean', default: false },
    // A CPU profile of the metered proxy (B3) over the run: flame graph and table in bench/results.
    profile: { type: 'boolean', default: false },
  },
});
const TRIAL_SECONDS = Number(args['trial-seconds']);
const ROUNDS = Number(args.rounds ?? (args['cpu-only'] ? 1 : 5));
const CONNECTIONS = Number(args.connections);
const LATENCY_SECONDS = Number(args['latency-seconds']);
/** A latency trial that started fewer than this share of its calls on schedule is not repeated. */
const HOPELESS_SHARE = 0.8;
const work = mkdtempSync(join(tmpdir(), 'mcpmeter-bench-proxy-'));
chmodSync(work, 0o755);
const children: ChildProcess[] = [];
const named = new Map<number, string>();
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
let stopInfra = () => {};

function spawnLogged(name: string, command: string, argv: string[], env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(command, argv, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const file = createWriteStream(join(work, `${name}.log`));
  child.stdout?.pipe(file);
  child.stderr?.pipe(file);
  children.push(child);
  if (child.pid !== undefined) named.set(child.pid, name);
  return child;
}

const firstLine = (child: ChildProcess) =>
  new Promise<string>((done) => child.stdout?.once('data', (chunk: Buffer) => done(chunk.toString('utf8'))));

async function waitFor(url: string, seconds = 120): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`${url} not ready`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function api<T>(base: string, key: string, method: string, path: string, body?: unknown): Promise<T> {
  // A kept-alive connection the service closed between two calls fails the first write: once more.
  const send = () =>
    fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const response = await send().catch(send);
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

// ------------------------------------------------------------------ scenarios and load generators

interface Scenario {
  method: string;
  headers: Record<string, string>;
  body: unknown;
}
const scenario = (file: string) =>
  JSON.parse(readFileSync(join(root, 'bench', 'scenarios', file), 'utf8')) as Scenario;
const CALL = scenario('tool-call.json');
const MODERN_CALL = scenario('tool-call-2026-07-28.json');

interface Target {
  url: string;
  token: string;
  call: Scenario;
}

const headersOf = (t: Target) => ({
  ...t.call.headers,
  ...(t.token === '' ? {} : { authorization: `Bearer ${t.token}` }),
});

/** The scenario as a wrk script (wrk's Lua has no JSON: the request is written out literally). */
function wrkScript(name: string, t: Target): string {
  const file = join(work, `${name}.lua`);
  const lines = [
    `wrk.method = ${JSON.stringify(t.call.method)}`,
    `wrk.body = ${JSON.stringify(JSON.stringify(t.call.body))}`,
    ...Object.entries(headersOf(t)).map(
      ([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`,
    ),
  ];
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

interface WrkResult {
  requests: number;
  rps: number;
  errors: number;
  p50: number;
  p99: number;
}

/** wrk, closed model: `CONNECTIONS` connections each sending the next call when the last is answered. */
function wrk(tools: Tools, name: string, t: Target, seconds: number, pin?: string): WrkResult {
  const argv = ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', wrkScript(name, t), t.url];
  const out = execFileSync(
    pin === undefined ? tools.WRK : 'taskset',
    pin === undefined ? argv : ['-c', pin, tools.WRK, ...argv],
    {
      encoding: 'utf8',
      timeout: (seconds + 30) * 1000,
    },
  );
  const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? 0);
  const ms = (label: string) => {
    const m = new RegExp(`\\s${label}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
    if (m === null) return Number.NaN;
    const v = Number(m[1]);
    return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
  };
  const requests = num(/(\d+) requests in/);
  const errors =
    num(/Non-2xx or 3xx responses: (\d+)/) +
    [...out.matchAll(/(connect|read|write|timeout) (\d+)/g)].reduce((s, m) => s + Number(m[2]), 0);
  return { requests, rps: num(/Requests\/sec:\s+([\d.]+)/), errors, p50: ms('50'), p99: ms('99') };
}

interface LatencyTrial {
  target: string;
  rate: number;
  requests: number;
  achievedRate: number;
  success: number;
  p50: number;
  p99: number;
  p999: number;
  valid: boolean;
  /** B3's garbage collection during the trial, read from its metrics page. */
  gc?: GcDuring;
  /** B3's own, origin and answer spans during the trial (its metrics page's histograms). */
  spans?: SpansDuring;
}

/** The three spans a proxy times per forwarded request (docs/proxy.md, its metrics). */
const SPANS = ['own', 'origin', 'answer'] as const;
type Span = (typeof SPANS)[number];

/** Per span over a trial: requests timed, those over 1 ms, and the bucket bound the 99th percentile falls in. */
type SpansDuring = Record<Span, { count: number; over1ms: number; p99AtMostMs: number }>;

/** Garbage-collection pauses of a proxy over a trial: how many and how long, by kind, and the longest. */
interface GcDuring {
  minor: number;
  minorMs: number;
  major: number;
  majorMs: number;
  longestMs: number;
}

/**
 * A GET's answer text, read on a connection of its own: vegeta runs while the event loop waits,
 * so a kept-alive connection its server closed meanwhile (idle) is found closed only when reused,
 * and a read right after a trial would fail. Used for every read around a vegeta trial.
 */
function freshGet(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    httpGet(url, { agent: false }, (answer) => {
      let text = '';
      answer.setEncoding('utf8');
      answer.on('data', (chunk: string) => {
        text += chunk;
      });
      answer.on('end', () => resolve(text));
      answer.on('error', reject);
    }).on('error', reject);
  });
}

/**
 * Waits (up to `seconds`) until the proxy serving `url` has published every usage record it
 * emitted, from its metrics page; what is still unpublished then (0 once caught up).
 */
async function whenPublished(url: string, seconds: number): Promise<number> {
  const page = `${new URL(url).origin}/metrics`;
  const metric = (text: string, name: string) =>
    Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const text = await freshGet(page);
    const left =
      metric(text, 'mcpmeter_usage_emitted_total') - metric(text, 'mcpmeter_usage_published_total');
    if (!(left > 0) || Date.now() >= deadline) return Number.isNaN(left) ? 0 : left;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A proxy's GC metrics (`mcpmeter_proxy_gc_*{kind}`) from its metrics page (whose read resets the longest pause), by name and kind. */
function gcMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const m of text.matchAll(/^mcpmeter_proxy_gc_(\w+)\{kind="(\w+)"\} ([\d.e+-]+)$/gm))
    values.set(`${m[1]} ${m[2]}`, Number(m[3]));
  return values;
}

/** A proxy's span histograms: cumulative bucket counts by span and upper bound (seconds). */
function spanBuckets(text: string): Map<Span, Map<number, number>> {
  const spans = new Map<Span, Map<number, number>>(SPANS.map((span) => [span, new Map()]));
  for (const m of text.matchAll(
    /^mcpmeter_proxy_(own|origin|answer)_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm,
  ))
    spans.get(m[1] as Span)?.set(m[2] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[2]), Number(m[3]));
  return spans;
}

function spansBetween(
  before: Map<Span, Map<number, number>>,
  after: Map<Span, Map<number, number>>,
): SpansDuring {
  const one = (span: Span) => {
    const was = before.get(span) ?? new Map<number, number>();
    const grew = [...(after.get(span) ?? new Map<number, number>())]
      .map(([bound, n]) => [bound, n - (was.get(bound) ?? 0)] as const)
      .sort((a, b) => a[0] - b[0]);
    const count = grew.at(-1)?.[1] ?? 0;
    const within1ms = grew.find(([bound]) => bound >= 0.001)?.[1] ?? count;
    const p99 = grew.find(([, n]) => n >= count * 0.99)?.[0] ?? Number.POSITIVE_INFINITY;
    return { count, over1ms: count - within1ms, p99AtMostMs: p99 * 1000 };
  };
  return { own: one('own'), origin: one('origin'), answer: one('answer') };
}

function gcBetween(before: Map<string, number>, after: Map<string, number>): GcDuring {
  const grew = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  let longest = 0;
  for (const [name, value] of after)
    if (name.startsWith('pause_max_seconds ')) longest = Math.max(longest, value);
  return {
    minor: grew('pauses_total minor'),
    minorMs: grew('pause_seconds_total minor') * 1000,
    major: grew('pauses_total major'),
    majorMs: grew('pause_seconds_total major') * 1000,
    longestMs: longest * 1000,
  };
}

/**
 * vegeta, open model: calls start on schedule whatever the target does. A trial whose calls
 * did not all start on time (the achieved rate short of the asked one) or did not all succeed is
 * invalid, reported as such and never as a latency.
 */
function vegeta(tools: Tools, name: string, t: Target, rate: number, seconds: number): LatencyTrial {
  const targets = join(work, `${name}.targets.json`);
  const header = Object.fromEntries(Object.entries(headersOf(t)).map(([k, v]) => [k, [v]]));
  // One JSON target per line, as vegeta reads them.
  writeFileSync(
    targets,
    `${JSON.stringify({
      method: t.call.method,
      url: t.url,
      header,
      body: Buffer.from(JSON.stringify(t.call.body)).toString('base64'),
    })}\n`,
  );
  const results = join(work, `${name}-${rate}.bin`);
  execFileSync(
    'bash',
    [
      '-c',
      `"$0" attack -format=json -targets="$1" -rate="$2"/1s -duration="$3"s -timeout=10s -workers=64 -max-workers=2000 > "$4"`,
      tools.VEGETA,
      targets,
      String(rate),
      String(seconds),
      results,
    ],
    { timeout: (seconds + 60) * 1000 },
  );
  const latencies: number[] = [];
  let ok = 0;
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  const csv = execFileSync(tools.VEGETA, ['encode', '--to=csv', results], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
  });
  for (const line of csv.split('\n')) {
    if (line === '') continue;
    const [timestamp, code, latency] = line.split(',');
    const at = Number(timestamp);
    first = Math.min(first, at);
    last = Math.max(last, at);
    latencies.push(Number(latency) / 1e6);
    if (code === '200') ok++;
  }
  latencies.sort((a, b) => a - b);
  const q = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? Number.NaN;
  const span = (last - first) / 1e9;
  const achievedRate = latencies.length / Math.max(span, 1e-9);
  const trial: LatencyTrial = {
    target: name,
    rate,
    requests: latencies.length,
    achievedRate,
    success: ok / Math.max(latencies.length, 1),
    p50: q(0.5),
    p99: q(0.99),
    p999: q(0.999),
    valid: ok === latencies.length && latencies.length >= rate * seconds * 0.99,
  };
  log(
    `${name} @${rate}/s: ${trial.requests} calls, success ${trial.success.toFixed(4)}, p50 ${trial.p50.toFixed(3)} p99 ${trial.p99.toFixed(3)} p99.9 ${trial.p999.toFixed(3)} ms${trial.valid ? '' : ' INVALID'}`,
  );
  rmSync(results, { force: true });
  return trial;
}

// ------------------------------------------------------------------ CPU per process

/**
 * CPU seconds (user + system) by process group, from /proc, and the system part of them: the
 * kernel's time on the process's behalf, for a hop almost all of it its socket calls. wrk and
 * vegeta are the bench's children and counted through its cutime. A process that exits between
 * two samples drops out (its last ticks are lost, never subtracted).
 */
type CpuSample = Map<string, { group: string; seconds: number; system: number }>;
const CLK_TCK = 100;
function statTimes(pid: string | number): number[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .slice(11, 15)
      .map(Number);
  } catch {
    return undefined;
  }
}
function cpuSample(): CpuSample {
  const sample: CpuSample = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const times = statTimes(pid);
    if (times === undefined) continue;
    const [utime = 0, stime = 0, cutime = 0, cstime = 0] = times;
    if (pid === process.pid) {
      sample.set(`${pid}`, { group: 'bench', seconds: (utime + stime) / CLK_TCK, system: stime / CLK_TCK });
      sample.set(`${pid}/children`, {
        group: 'load generator',
        seconds: (cutime + cstime) / CLK_TCK,
        system: cstime / CLK_TCK,
      });
      continue;
    }
    sample.set(`${pid}`, {
      group: groupOf(pid),
      seconds: (utime + stime) / CLK_TCK,
      system: stime / CLK_TCK,
    });
  }
  return sample;
}

/** Which of the stack's processes `pid` is ('other' when none). */
function groupOf(pid: number): string {
  const group = named.get(pid);
  if (group !== undefined) return group;
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {}
  return cmdline.includes('kafka.Kafka')
    ? 'kafka'
    : cmdline.includes('redis-server')
      ? 'redis'
      : cmdline.startsWith('nginx')
        ? 'nginx'
        : cmdline.includes('postgres')
          ? 'postgres'
          : 'other';
}

/** How busy a pinned trial kept each side: the measured group's core, and the rest in cores. */
interface CoresBusy {
  hop: number;
  rest: number;
}

const percent = (share: number) => `${Math.round(share * 100)}%`;

/**
 * Two trials with `group` (all its threads) alone on core 0 and every other process of the stack
 * on core 1 (origin, nginx, the other hops, the control plane, PostgreSQL, Redis, Kafka; wrk is
 * started there), then every process free again. Each trial comes with the CPU its side used per
 * second of wall time: the hop's own near 1.0 means the figure is its core's; short of that, the
 * other core (wrk and the origin) or waiting held it back.
 */
function onOneCore(group: string, trial: () => WrkResult): Array<{ result: WrkResult; busy: CoresBusy }> {
  const stack = [...new Set([...named.values(), 'kafka', 'redis', 'postgres', 'nginx'])];
  pinGroups(
    stack.filter((g) => g !== group),
    '1',
  );
  pinGroups([group], '0');
  const trials = [0, 1].map(() => {
    const before = cpuSample();
    const started = performance.now();
    const result = trial();
    const used = cpuBetween(before, cpuSample());
    const seconds = (performance.now() - started) / 1000;
    const rest = Object.entries(used).reduce((sum, [g, s]) => (g === group ? sum : sum + s), 0);
    return { result, busy: { hop: (used[group] ?? 0) / seconds, rest: rest / seconds } };
  });
  pinGroups(stack, '0,1');
  return trials;
}

/** Moves every process of `groups` (all its threads) to `cpus` (taskset's list, '0,1' for both). */
function pinGroups(groups: readonly string[], cpus: string): void {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || !groups.includes(groupOf(Number(entry)))) continue;
    try {
      execFileSync('taskset', ['-a', '-p', '-c', cpus, entry], { stdio: 'ignore' });
    } catch {} // gone meanwhile
  }
}
function cpuBetween(
  before: CpuSample,
  after: CpuSample,
  part: 'seconds' | 'system' = 'seconds',
): Record<string, number> {
  const used: Record<string, number> = {};
  for (const [key, now] of after) {
    const earlier = before.get(key);
    // A pid seen again after a restart counts from zero, as a new process.
    const fresh = earlier === undefined || earlier.seconds > now.seconds;
    used[now.group] = (used[now.group] ?? 0) + (fresh ? now[part] : now[part] - earlier[part]);
  }
  return used;
}

/** A count read every second until it holds for three reads (or `seconds` pass): the pipeline has caught up. */
async function whenStable(read: () => Promise<number>, seconds: number): Promise<number> {
  let last = -1;
  for (let i = 0, stable = 0; i < seconds && stable < 3; i++) {
    const now = await read();
    stable = now === last ? stable + 1 : 0;
    last = now;
    await new Promise((r) => setTimeout(r, 1000));
  }
  return last;
}

async function redisCommands(redis: Redis): Promise<number> {
  const info = await redis.info('stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0);
}

// ------------------------------------------------------------------ the run

type Tools = { WRK: string; VEGETA: string; NGINX: string };
const TARGETS = ['B1', 'N', 'BP', 'BPn', 'B2', 'B3', 'B3m', 'A'] as const;
type TargetName = (typeof TARGETS)[number];
/** The process whose CPU is "the proxy" of each target. */
const PROXY_GROUP: Record<TargetName, string> = {
  B1: 'origin',
  N: 'nginx',
  BP: 'passthrough',
  BPn: 'passthrough-net',
  B2: 'proxy-b2',
  B3: 'proxy-b3',
  B3m: 'proxy-b3',
  A: 'all-in-one',
};

interface SaturationRow {
  target: TargetName;
  rounds: Array<{
    rps: number;
    requests: number;
    errors: number;
    usPerCall: Record<string, number>;
    /** The system part of `usPerCall` (absent in runs from before it was measured). */
    systemUsPerCall?: Record<string, number>;
  }>;
}

/**
 * The order of a round's trials: each compared pair side by side (nginx and the all-in-one
 * service, the bare hop and the metered proxy), so the pair's two trials run seconds apart and see
 * the same machine. Every other round runs it backwards, so neither of a pair always goes first.
 */
const ROUND_ORDER: readonly TargetName[] = ['B1', 'N', 'A', 'BP', 'B3', 'B3m', 'B2', 'BPn'];

/**
 * The machine's own noise, measured: a fixed JavaScript workload (allocation, JSON, a hash map)
 * on core 0 with no load running, timed in CPU milliseconds once per round. On a shared virtual
 * machine the same work can take twice as long from one minute to the next (neighbours on the
 * caches and memory), which no method inside one machine removes: the report shows the spread.
 */
const REFERENCE_WORKLOAD = `
const t0 = process.cpuUsage();
const keep = new Map();
let n = 0;
for (let i = 0; i < 150000; i++) {
  const o = { id: 'rec_' + i, tool: 'add', args: { a: i, b: [1, 2, 3] }, at: 1700000000000 + i };
  const text = JSON.stringify(o);
  n += JSON.parse(text).args.a & 1;
  keep.set(i % 4096, text);
}
const u = process.cpuUsage(t0);
process.stdout.write(String((u.user + u.system) / 1000 + n * 0));
`;

function referenceMs(): number {
  const out = execFileSync('taskset', ['-c', '0', process.execPath, '-e', REFERENCE_WORKLOAD], {
    encoding: 'utf8',
  });
  return Number(out);
}

const median = (values: number[]) => {
  const s = [...values].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : (s[Math.floor((s.length - 1) / 2)] as number);
};

async function main() {
  if (args['report-only']) {
    const saved = JSON.parse(readFileSync(join(root, 'bench', 'results', 'proxy.json'), 'utf8')) as Result;
    writeResults(saved);
    return;
  }
  // The services' build is made (or found up to date) before anything is timed.
  execFileSync(process.execPath, [join(root, 'deploy', 'build.mjs')], { stdio: 'inherit' });
  const tools = Object.fromEntries(
    execFileSync('bash', [join(root, 'bench', 'load', 'install.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    })
      .trim()
      .split('\n')
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  ) as Tools;
  const ports = {
    REDIS_PORT: String(await freePort()),
    KAFKA_PORT: String(await freePort()),
    KAFKA_CONTROLLER_PORT: String(await freePort()),
    PG_PORT: String(await freePort()),
  };
  const infraEnv = { ...process.env, STACK_DIR: join(work, 'stack'), ...ports };
  const infra = join(root, 'deploy', 'infra.sh');
  stopInfra = () => execFileSync('bash', [infra, 'all', 'stop'], { stdio: 'inherit', env: infraEnv });
  execFileSync('bash', [infra, 'all', 'start'], { stdio: 'inherit', env: infraEnv, timeout: 300_000 });
  const urls = Object.fromEntries(
    execFileSync('bash', [infra, 'all', 'env'], { env: infraEnv, encoding: 'utf8' })
      .trim()
      .split('\n')
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  ) as Record<string, string>;

  const cpPort = await freePort();
  const base = `http://127.0.0.1:${cpPort}`;
  const env = {
    ...process.env,
    OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATA_DIR: join(work, 'data'),
    DATABASE_URL: urls.DATABASE_URL,
    REDIS_URL: urls.REDIS_URL,
    KAFKA_BROKERS: urls.KAFKA_BROKERS,
    SECRET_KEY: 'ef'.repeat(32),
    PORT: String(cpPort),
    CONTROL_PLANE_URL: base,
  };
  // The services as `npm start` runs them: from their build (made at the start of the run).
  const serve = [...NODE_FLAGS, 'deploy/start.mjs'];
  spawnLogged('control-plane', process.execPath, serve, { ...env, SERVICES: 'control-plane,ingest' });
  const servers = spawnLogged(
    'origin',
    process.execPath,
    ['--import', './deploy/loader.mjs', 'bench/load/servers.ts'],
    env,
  );
  const { originPort } = JSON.parse(await firstLine(servers)) as { originPort: number };
  const passthrough = spawnLogged(
    'passthrough',
    process.execPath,
    ['--import', './deploy/loader.mjs', 'bench/load/passthrough.ts'],
    { ...env, ORIGIN_URL: `http://127.0.0.1:${originPort}/bp` },
  );
  const passthroughPort = (JSON.parse(await firstLine(passthrough)) as { port: number }).port;
  // BPn: the same hop with a lean HTTP/1.1 client over net instead of undici (a bench prototype).
  const passthroughNet = spawnLogged(
    'passthrough-net',
    process.execPath,
    ['--import', './deploy/loader.mjs', 'bench/load/passthrough.ts'],
    { ...env, ORIGIN_URL: `http://127.0.0.1:${originPort}/bpn`, PASSTHROUGH_CLIENT: 'net' },
  );
  const passthroughNetPort = (JSON.parse(await firstLine(passthroughNet)) as { port: number }).port;

  // N: nginx as a keep-alive reverse proxy, one worker (as one Node process is one core).
  const nginxPort = await freePort();
  const nginxDir = join(work, 'nginx');
  execFileSync('mkdir', ['-p', join(nginxDir, 'logs')]);
  writeFileSync(
    join(nginxDir, 'nginx.conf'),
    `daemon off;
master_process off;
worker_processes 1;
error_log ${join(nginxDir, 'logs', 'error.log')} warn;
pid ${join(nginxDir, 'nginx.pid')};
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${nginxDir};
  proxy_temp_path ${nginxDir};
  upstream origin { server 127.0.0.1:${originPort}; keepalive 256; }
  server {
    listen 127.0.0.1:${nginxPort};
    location / {
      proxy_pass http://origin/n;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  spawnLogged('nginx', tools.NGINX, ['-p', nginxDir, '-c', join(nginxDir, 'nginx.conf')], env);
  await waitFor(`${base}/healthz`);

  const admin = (dataEnv: NodeJS.ProcessEnv) =>
    JSON.parse(
      execFileSync('npm', ['run', '-s', 'admin', '--', 'provider', 'create', '--name', 'Bench'], {
        cwd: root,
        env: dataEnv,
        encoding: 'utf8',
      }),
    ) as { sandboxKey: string };
  /** A product with a free plan of a real limit, MCP servers for `paths`, a customer and a token. */
  const seller = async (apiBase: string, key: string, paths: string[]) => {
    const product = await api<{ id: string }>(apiBase, key, 'POST', '/v1/ui/products', { name: 'Bench' });
    const plan = await api<{ id: string }>(apiBase, key, 'POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Free',
      type: 'recurring',
      billingCycle: 'monthly',
      price: 0,
      currency: 'usd',
      limit: 1_000_000_000,
    });
    const servers: Array<{ id: string; subdomain: string }> = [];
    for (const path of paths)
      servers.push(
        await api(apiBase, key, 'POST', '/v1/ui/mcp-servers', {
          name: `bench${path.replaceAll('/', '-')}`,
          url: `http://127.0.0.1:${originPort}${path}`,
          productId: product.id,
          defaultPlanId: plan.id,
        }),
      );
    const customer = await api<{ reference: string }>(apiBase, key, 'POST', '/v1/sdk/customers', {});
    // A purchase of the free plan: what the limit check (and the proxy's gate) count against.
    const activated = await api<{ status: string }>(apiBase, key, 'POST', '/v1/sdk/activate', {
      customerRef: customer.reference,
      planRef: plan.id,
    });
    if (activated.status !== 'activated')
      throw new Error(`the bench customer was not activated: ${activated.status}`);
    const { accessToken } = await api<{ accessToken: string }>(
      apiBase,
      key,
      'POST',
      `/v1/sdk/customers/${customer.reference}/tokens`,
      { expiresInSeconds: 86_400 },
    );
    return { servers, customer: customer.reference, product: product.id, token: accessToken };
  };
  const key = admin(env).sandboxKey;
  const split = await seller(base, key, ['/b2', '/b3']);
  const [b2Server, b3Server] = split.servers as [
    { id: string; subdomain: string },
    { id: string; subdomain: string },
  ];

  const proxyPorts = [await freePort(), await freePort()];
  spawnLogged('proxy-b2', process.execPath, serve, {
    ...env,
    SERVICES: 'proxy',
    PROXY_PORT: String(proxyPorts[0]),
    PROXY_METERING_ENABLED: 'false',
    PROXY_SPILL_DIR: join(work, 'spill-b2'),
  });
  const profileDir = join(work, 'profile');
  const b3Process = spawnLogged(
    'proxy-b3',
    process.execPath,
    [...(args.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), ...serve],
    {
      ...env,
      SERVICES: 'proxy',
      PROXY_PORT: String(proxyPorts[1]),
      PROXY_SPILL_DIR: join(work, 'spill-b3'),
    },
  );
  for (const port of proxyPorts) await waitFor(`http://127.0.0.1:${port}/healthz`);

  // A: `npm start` as it runs on embedded defaults, a data directory of its own.
  const aPort = await freePort();
  const aProxyPort = await freePort();
  const aEnv = {
    ...process.env,
    OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATA_DIR: join(work, 'all-in-one'),
    PORT: String(aPort),
    PROXY_PORT: String(aProxyPort),
  };
  spawnLogged('all-in-one', process.execPath, serve, aEnv);
  await waitFor(`http://127.0.0.1:${aPort}/healthz`, 240);
  await waitFor(`http://127.0.0.1:${aProxyPort}/healthz`);
  const aKey = admin(aEnv).sandboxKey;
  const allInOne = await seller(`http://127.0.0.1:${aPort}`, aKey, ['/a']);

  const targets: Record<TargetName, Target> = {
    B1: { url: `http://127.0.0.1:${originPort}/b1`, token: '', call: CALL },
    N: { url: `http://127.0.0.1:${nginxPort}/`, token: '', call: CALL },
    BP: { url: `http://127.0.0.1:${passthroughPort}/`, token: '', call: CALL },
    BPn: { url: `http://127.0.0.1:${passthroughNetPort}/`, token: '', call: CALL },
    B2: {
      url: `http://127.0.0.1:${proxyPorts[0]}/mcp/${b2Server.subdomain}`,
      token: split.token,
      call: CALL,
    },
    B3: {
      url: `http://127.0.0.1:${proxyPorts[1]}/mcp/${b3Server.subdomain}`,
      token: split.token,
      call: CALL,
    },
    B3m: {
      url: `http://127.0.0.1:${proxyPorts[1]}/mcp/${b3Server.subdomain}`,
      token: split.token,
      call: MODERN_CALL,
    },
    A: {
      url: `http://127.0.0.1:${aProxyPort}/mcp/${allInOne.servers[0]?.subdomain}`,
      token: allInOne.token,
      call: CALL,
    },
  };
  // Every target answers a tool result before anything is measured.
  for (const name of TARGETS) {
    const t = targets[name];
    const answer = await fetch(t.url, {
      method: 'POST',
      headers: headersOf(t),
      body: JSON.stringify(t.call.body),
    });
    const text = await answer.text();
    if (answer.status !== 200 || !text.includes('"result"') || text.includes('payment_required'))
      throw new Error(`${name} did not answer a tool result: ${answer.status} ${text.slice(0, 300)}`);
  }

  // Warm-up: JIT, pools, snapshot caches, the limit counter's lease, the broker's JIT.
  for (const name of TARGETS) wrk(tools, name, targets[name], 5);
  wrk(tools, 'B3', targets.B3, 20);

  const redis = new Redis(urls.REDIS_URL ?? '');
  let b3Commands = 0;
  let b3Calls = 0;
  // Saturation, closed model: rounds that take every target in turn, so drift reaches all alike.
  const saturation: SaturationRow[] = TARGETS.map((target) => ({ target, rounds: [] }));
  const reference: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    reference.push(referenceMs());
    const order = round % 2 === 0 ? ROUND_ORDER : [...ROUND_ORDER].reverse();
    for (const row of order.map((t) => saturation.find((s) => s.target === t) as SaturationRow)) {
      const before = cpuSample();
      const commandsBefore = row.target === 'B3' ? await redisCommands(redis) : 0;
      const result = wrk(tools, row.target, targets[row.target], TRIAL_SECONDS);
      // The pipeline finishes the trial's records (their CPU belongs to these calls): the hop
      // has published them all (A: stored them), then the consumer's flush interval passes.
      if (row.target === 'B3' || row.target === 'B3m' || row.target === 'A') {
        const unpublished = await whenPublished(targets[row.target].url, 30);
        if (unpublished > 0)
          log(`${row.target} round ${round + 1}: ${unpublished} records still unpublished after 30 s`);
        await new Promise((r) => setTimeout(r, 2000));
      }
      const after = cpuSample();
      if (row.target === 'B3') {
        b3Commands += (await redisCommands(redis)) - commandsBefore - 1;
        b3Calls += result.requests;
      }
      const perCall = (part: 'seconds' | 'system') =>
        Object.fromEntries(
          Object.entries(cpuBetween(before, after, part)).map(([group, seconds]) => [
            group,
            (seconds * 1e6) / Math.max(result.requests, 1),
          ]),
        );
      const usPerCall = perCall('seconds');
      row.rounds.push({
        rps: result.rps,
        requests: result.requests,
        errors: result.errors,
        usPerCall,
        systemUsPerCall: perCall('system'),
      });
      log(
        `${row.target} round ${round + 1}: ${Math.round(result.rps)} calls/s, ${result.errors} errors; CPU µs/call ${row.target} ${(usPerCall[PROXY_GROUP[row.target]] ?? 0).toFixed(1)}, all ${Object.values(
          usPerCall,
        )
          .reduce((a, b) => a + b, 0)
          .toFixed(1)}`,
      );
    }
  }
  if (args['cpu-only']) {
    printCpu(saturation);
    if (args.profile) await writeProfile(b3Process, profileDir);
    const hold = Number(args['hold-seconds']);
    if (hold > 0) {
      log(
        `holding ${hold} s: ${JSON.stringify({ targets, limitCheck: { url: `${base}/v1/sdk/limits`, key, body: { customerRef: split.customer, productRef: split.product } }, pids: Object.fromEntries([...named].map(([p, n]) => [n, p])) })}`,
      );
      await new Promise((r) => setTimeout(r, hold * 1000));
    }
    await redis.quit();
    return;
  }

  // One proxy process alone on core 0, wrk, the origin and the rest of the stack on core 1: the
  // most calls/s one core of each hop gives, with how busy each side was (a hop short of its
  // whole core was held back by the other one).
  const pinned: Record<string, number> = {};
  const pinnedBusy: Record<string, CoresBusy> = {};
  for (const name of ['N', 'BP', 'B2', 'B3'] as const) {
    const best = onOneCore(PROXY_GROUP[name], () =>
      wrk(tools, name, targets[name], TRIAL_SECONDS, '1'),
    ).reduce((a, b) => (b.result.rps > a.result.rps ? b : a));
    pinned[name] = best.result.rps;
    pinnedBusy[name] = best.busy;
    log(
      `${name} pinned to one core: ${Math.round(best.result.rps)} calls/s; its core ${percent(best.busy.hop)} busy, the rest ${percent(best.busy.rest)} of a core`,
    );
  }

  // The control plane's limit check (POST /v1/sdk/limits, one call consumed per check), its
  // process pinned to core 0 likewise; exactness: the calls it counted against what wrk saw
  // answered (a check abandoned at a trial's end may still have counted).
  const limitCheck = {
    url: `${base}/v1/sdk/limits`,
    token: key,
    call: {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: { customerRef: split.customer, productRef: split.product },
    },
  };
  const usedOf = async () =>
    (
      await api<{ used: number }>(base, key, 'POST', '/v1/sdk/limits', {
        customerRef: split.customer,
        productRef: split.product,
        consume: false,
      })
    ).used;
  // `used` counts stored records: read once the pipeline has stored the checks' records.
  const settledUsed = () => whenStable(usedOf, 60);
  // Warm-up, as every proxy target had: the check's route compiled and optimised, its subject kept.
  wrk(tools, 'L', limitCheck, 5);
  const usedBefore = await settledUsed();
  // The control plane alone on core 0; what it calls (PostgreSQL, Redis, Kafka) on core 1 with
  // wrk, as a proxy's origin is on the other core: the core measured is the control plane's own.
  const checks = onOneCore('control-plane', () => wrk(tools, 'L', limitCheck, TRIAL_SECONDS, '1'));
  const usedDelta = (await settledUsed()) - usedBefore;
  const bestCheck = checks.reduce((a, b) => (b.result.rps > a.result.rps ? b : a));
  const limits = {
    rps: bestCheck.result.rps,
    answered: checks.reduce((a, c) => a + c.result.requests, 0),
    errors: checks.reduce((a, c) => a + c.result.errors, 0),
    counted: usedDelta,
    busy: bestCheck.busy,
  };
  log(
    `limit check pinned to one core: ${Math.round(limits.rps)} checks/s; ${limits.answered} answered, ${limits.counted} counted, ${limits.errors} errors; its core ${percent(limits.busy.hop)} busy`,
  );

  // Added latency over the origin at 25% and 50% of B1's maximum (the issue's loads), and at 25%
  // of B3's own maximum (a load the metered proxy sustains here), interleaved.
  const maxOf = (t: TargetName) =>
    median(saturation.find((r) => r.target === t)?.rounds.map((r) => r.rps) ?? []);
  const rateAt = (max: number, share: number) => Math.max(100, Math.round((max * share) / 100) * 100);
  const latency: LatencyTrial[] = [];
  // B3's collector pauses over each of its trials, from its metrics page: what its tail is made of.
  const b3Base = new URL(targets.B3.url).origin;
  for (const rate of [rateAt(maxOf('B3'), 0.25), rateAt(maxOf('B1'), 0.25), rateAt(maxOf('B1'), 0.5)]) {
    for (let i = 0; i < 2; i++)
      for (const name of ['B1', 'N', 'BP', 'B3'] as const) {
        // A first trial that could not start even 80% of its calls on schedule says the machine
        // cannot carry this target at this rate; a second would say it again.
        const first = latency.find((x) => x.target === name && x.rate === rate);
        if (first !== undefined && first.achievedRate < rate * HOPELESS_SHARE) continue;
        const before = name === 'B3' ? await freshGet(`${b3Base}/metrics`) : undefined;
        const trial = vegeta(tools, name, targets[name], rate, LATENCY_SECONDS);
        if (before !== undefined) {
          const after = await freshGet(`${b3Base}/metrics`);
          trial.gc = gcBetween(gcMetrics(before), gcMetrics(after));
          trial.spans = spansBetween(spanBuckets(before), spanBuckets(after));
        }
        latency.push(trial);
      }
  }

  // Completeness: an open-model B3 trial at half of B3's maximum (vegeta lets every call it
  // started finish, where wrk's end abandons the calls in flight): the records it adds in
  // ClickHouse against the calls it adds at the origin, once the pipeline has caught up.
  const answered = async () =>
    (JSON.parse(await freshGet(`http://127.0.0.1:${originPort}/count`)) as Record<string, number>)['/b3'] ??
    0;
  const recordedOf = async () =>
    (
      await api<{ groups: Array<{ value: string; records: number }> }>(
        base,
        key,
        'GET',
        '/ui/meters/requests/usage?groupBy=server',
      )
    ).groups.find((g) => g.value === b3Server.id)?.records ?? 0;
  const settle = () => whenStable(recordedOf, 120);
  const recordedBefore = await settle();
  const answeredBefore = await answered();
  vegeta(tools, 'B3', targets.B3, rateAt(maxOf('B3'), 0.5), 10);
  const answeredDelta = (await answered()) - answeredBefore;
  const recordedDelta = (await settle()) - recordedBefore;
  await redis.quit();
  if (args.profile) await writeProfile(b3Process, profileDir);

  const result: Result = {
    date: new Date().toISOString(),
    machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}`,
    method: {
      trialSeconds: TRIAL_SECONDS,
      rounds: ROUNDS,
      connections: CONNECTIONS,
      latencySeconds: LATENCY_SECONDS,
      notRepeatedBelow: HOPELESS_SHARE,
    },
    saturation,
    reference,
    pinned,
    pinnedBusy,
    latency,
    limits,
    redisCommandsPerCall: b3Commands / Math.max(b3Calls, 1),
    completeness: {
      answered: answeredDelta,
      recorded: recordedDelta,
      ratio: recordedDelta / Math.max(answeredDelta, 1),
    },
  };
  writeResults(result);
}

/** Stops the profiled proxy (it writes its profile as it exits) and draws the profile. */
async function writeProfile(child: ChildProcess, dir: string): Promise<void> {
  const exited = new Promise((done) => child.once('exit', done));
  if (child.pid !== undefined) process.kill(child.pid, 'SIGTERM');
  await exited;
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error('the proxy wrote no CPU profile');
  const { svg, table } = flame(
    JSON.parse(readFileSync(join(dir, file), 'utf8')),
    'proxy B3 (every call metered), wrk and vegeta load',
  );
  writeFileSync(join(root, 'bench', 'results', 'proxy-profile.svg'), svg);
  writeFileSync(
    join(root, 'bench', 'results', 'proxy-profile.md'),
    `# Where the metered proxy's CPU goes\n\nA \`node --cpu-prof\` profile of the B3 proxy process over a \`npm run bench:proxy -- --profile\` run (${new Date().toISOString()}), drawn as [proxy-profile.svg](proxy-profile.svg). Shares are of the process's busy time (idle left out); frames are named by their TypeScript source and line through the build's source maps. Native frames (\`writeBuffer\`: a socket write; \`(program)\`: the engine and uWebSockets.js outside JavaScript) are the system calls and the runtime. Self time by function, the top 30:\n\n${table}`,
  );
  log('written bench/results/proxy-profile.{md,svg}');
}

interface Result {
  date: string;
  machine: string;
  method: {
    trialSeconds: number;
    rounds: number;
    connections: number;
    latencySeconds: number;
    /** A latency trial that started fewer than this share of its calls was not repeated (absent: every trial ran twice). */
    notRepeatedBelow?: number;
  };
  saturation: SaturationRow[];
  /** The reference workload's CPU ms, once per round (absent in runs from before it). */
  reference?: number[];
  pinned: Record<string, number>;
  /** How busy each pinned trial kept the hop's core and the rest (absent in runs from before it). */
  pinnedBusy?: Record<string, CoresBusy>;
  latency: LatencyTrial[];
  redisCommandsPerCall: number;
  completeness: { answered: number; recorded: number; ratio: number };
  /** The control plane's limit check on one pinned core (absent in runs from before it). */
  limits?: { rps: number; answered: number; errors: number; counted: number; busy?: CoresBusy };
}

/** Median over rounds of each process group's CPU µs per call. */
function cpuOf(row: SaturationRow): Record<string, number> {
  const groups = new Set(row.rounds.flatMap((r) => Object.keys(r.usPerCall)));
  return Object.fromEntries([...groups].map((g) => [g, median(row.rounds.map((r) => r.usPerCall[g] ?? 0))]));
}

const GROUPS: Array<[string, string]> = [
  ['load generator', 'wrk'],
  ['origin', 'origin'],
  ['nginx', 'nginx'],
  ['passthrough', 'bare hop BP'],
  ['passthrough-net', 'bare hop BPn (net client)'],
  ['proxy-b2', 'proxy B2'],
  ['proxy-b3', 'proxy B3'],
  ['all-in-one', 'all-in-one service'],
  ['kafka', 'Kafka'],
  ['control-plane', 'control plane + ingest + chdb'],
  ['redis', 'Redis'],
  ['postgres', 'PostgreSQL'],
  ['bench', 'bench script'],
  ['other', 'other'],
];

function printCpu(saturation: SaturationRow[]) {
  for (const row of saturation) {
    const cpu = cpuOf(row);
    const group = PROXY_GROUP[row.target];
    const system = median(row.rounds.map((r) => r.systemUsPerCall?.[group] ?? 0));
    log(
      `${row.target}: ${Math.round(median(row.rounds.map((r) => r.rps)))} calls/s; CPU µs/call ${GROUPS.filter(
        ([g]) => (cpu[g] ?? 0) >= 0.5,
      )
        .map(
          ([g, label]) =>
            `${label} ${(cpu[g] ?? 0).toFixed(1)}${g === group ? ` (system ${system.toFixed(1)})` : ''}`,
        )
        .join(', ')}`,
    );
  }
}

function writeResults(r: Result) {
  writeFileSync(join(root, 'bench', 'results', 'proxy.json'), `${JSON.stringify(r, null, 2)}\n`);
  writeFileSync(join(root, 'bench', 'results', 'proxy.svg'), plot(r));
  writeFileSync(join(root, 'bench', 'results', 'proxy.md'), report(r));
  log('written bench/results/proxy.{md,json,svg}');
}

/** Stacked bars: CPU µs per call of each target, by process. */
function plot(r: Result): string {
  const colors = [
    '#bbb',
    '#8da0cb',
    '#66c2a5',
    '#a6d854',
    '#fc8d62',
    '#e78ac3',
    '#ffd92f',
    '#e5c494',
    '#b3b3b3',
    '#1b9e77',
    '#d95f02',
    '#7570b3',
    '#666',
  ];
  const rows = r.saturation.map((row) => ({ target: row.target, cpu: cpuOf(row) }));
  const max = Math.max(...rows.map((row) => Object.values(row.cpu).reduce((a, b) => a + b, 0)), 1);
  const width = 760;
  const barH = 26;
  const left = 60;
  const scale = (width - left - 180) / max;
  const parts: string[] = [];
  rows.forEach((row, i) => {
    let x = left;
    const y = 30 + i * (barH + 10);
    parts.push(`<text x="${left - 8}" y="${y + 18}" text-anchor="end" font-size="13">${row.target}</text>`);
    GROUPS.forEach(([group], g) => {
      const w = (row.cpu[group] ?? 0) * scale;
      if (w <= 0) return;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${colors[g]}"/>`,
      );
      x += w;
    });
    const total = Object.values(row.cpu).reduce((a, b) => a + b, 0);
    parts.push(`<text x="${(x + 6).toFixed(1)}" y="${y + 18}" font-size="12">${total.toFixed(0)} µs</text>`);
  });
  const legendY = 30 + rows.length * (barH + 10) + 10;
  GROUPS.forEach(([, label], g) => {
    const x = left + (g % 4) * 170;
    const y = legendY + Math.floor(g / 4) * 18;
    parts.push(
      `<rect x="${x}" y="${y}" width="12" height="12" fill="${colors[g]}"/><text x="${x + 16}" y="${y + 11}" font-size="11">${label}</text>`,
    );
  });
  const height = legendY + Math.ceil(GROUPS.length / 4) * 18 + 10;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<text x="${left}" y="18" font-size="14">CPU µs per call by process, wrk at saturation (${r.date.slice(0, 10)})</text>
${parts.join('\n')}
</svg>
`;
}

function report(r: Result): string {
  const row = (t: TargetName) => r.saturation.find((s) => s.target === t);
  const cpu = (t: TargetName) => {
    const s = row(t);
    return s === undefined ? {} : cpuOf(s);
  };
  const own = (t: TargetName) => cpu(t)[PROXY_GROUP[t]] ?? Number.NaN;
  const all = (t: TargetName) => Object.values(cpu(t)).reduce((a, b) => a + b, 0);
  const best = (t: string, rate: number, pick: (x: LatencyTrial) => number) => {
    const valid = r.latency.filter((x) => x.target === t && x.rate === rate && x.valid);
    return valid.length === 0 ? Number.NaN : Math.min(...valid.map(pick));
  };
  const rates = [...new Set(r.latency.map((x) => x.rate))].sort((a, b) => a - b);
  const fmt = (v: number, d = 1) => (Number.isNaN(v) ? 'invalid' : v.toFixed(d));
  const fmtPart = (v: number) => (Number.isNaN(v) ? 'n/a' : v.toFixed(1));
  const goal = (ok: boolean) => (ok ? 'met' : '**not met**');
  // A pair's ratio, round by round (its two trials ran back to back), then the median and spread.
  const paired = (a: TargetName, b: TargetName) => {
    const over = row(b)?.rounds ?? [];
    const ratios = (row(a)?.rounds ?? [])
      .map(
        (x, i) =>
          (x.usPerCall[PROXY_GROUP[a]] ?? Number.NaN) / (over[i]?.usPerCall[PROXY_GROUP[b]] ?? Number.NaN),
      )
      .filter(Number.isFinite);
    return { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) };
  };
  const spread = (x: { min: number; max: number }, d = 2) => `${fmt(x.min, d)}–${fmt(x.max, d)}`;
  // A: the all-in-one service's CPU per call (its one process) over nginx's.
  const aN = paired('A', 'N');
  const b3Bp = paired('B3', 'BP');
  const aOverN = aN.median;
  const b3OverBp = b3Bp.median;
  // The hop's own CPU split, round by round then the median: system time (the kernel, on its
  // behalf) and user time (its code, runtime and libraries).
  const ownPart = (t: TargetName, part: 'system' | 'user') => {
    const values = (row(t)?.rounds ?? []).flatMap((x) => {
      const system = x.systemUsPerCall?.[PROXY_GROUP[t]];
      if (system === undefined) return [];
      return [part === 'system' ? system : (x.usPerCall[PROXY_GROUP[t]] ?? 0) - system];
    });
    return values.length === 0 ? Number.NaN : median(values);
  };
  const ownSpread = (t: TargetName) => {
    const values = (row(t)?.rounds ?? []).map((x) => x.usPerCall[PROXY_GROUP[t]] ?? Number.NaN);
    return values.length === 0 ? 'n/a' : spread({ min: Math.min(...values), max: Math.max(...values) }, 0);
  };
  const reference = r.reference ?? [];
  // Something outside the stack (a compiler, an editor's indexer) that ran during a trial took
  // cores from it: such trials are named, so a reader knows which figures it touched.
  const disturbed = r.saturation.flatMap((s) =>
    s.rounds.flatMap((x, i) =>
      (x.usPerCall.other ?? 0) > 0.1 * (x.usPerCall[PROXY_GROUP[s.target]] ?? 0)
        ? [`${s.target} round ${i + 1} (${fmt(x.usPerCall.other ?? 0)} µs/call)`]
        : [],
    ),
  );
  const noise =
    reference.length === 0
      ? 'not measured in this run.'
      : `a fixed JavaScript workload (allocation, JSON, a map; no load running) on core 0 took ${reference
          .map((v) => v.toFixed(0))
          .join(
            ', ',
          )} ms, round by round (the slowest ${fmt(Math.max(...reference) / Math.min(...reference), 2)}× the fastest). The virtual machine's neighbours move memory-bound work by that much from one minute to the next, whatever runs here; a single trial can be off by as much, which is why no figure here comes from one trial.`;
  const added = (rate: number, t: string, p: (x: LatencyTrial) => number) =>
    best(t, rate, p) - best('B1', rate, p);
  const latencyRows = rates
    .map(
      (rate) =>
        `| ${rate}/s | ${['N', 'BP', 'B3']
          .map(
            (t) =>
              `${fmt(
                added(rate, t, (x) => x.p50),
                3,
              )} / ${fmt(
                added(rate, t, (x) => x.p99),
                3,
              )} / ${fmt(
                added(rate, t, (x) => x.p999),
                3,
              )}`,
          )
          .join(' | ')} | ${fmt(
          best('B1', rate, (x) => x.p50),
          3,
        )} / ${fmt(
          best('B1', rate, (x) => x.p99),
          3,
        )} |`,
    )
    .join('\n');
  const light = rates[0] ?? 0;
  const heavy = rates[1] ?? 0;
  const cpuRows = GROUPS.filter(([g]) => r.saturation.some((s) => (cpuOf(s)[g] ?? 0) >= 0.05))
    .map(([g, label]) => `| ${label} | ${r.saturation.map((s) => fmt(cpuOf(s)[g] ?? 0)).join(' | ')} |`)
    .join('\n');
  return `# Proxy benchmark (wrk and vegeta)

Run ${r.date} on ${r.machine}. Everything (load generator, origin, nginx, proxies, control plane,
Redis, Kafka, ClickHouse) shares this machine: the ratios, measured in one run, are what count.
Method below the tables; the plot is [proxy.svg](proxy.svg).

## Goals (issue 28)

| measure | now | goal | |
| --- | --- | --- | --- |
| proxy process CPU per metered call (B3) | ${fmt(own('B3'))} µs | ≤ 60 µs | ${goal(own('B3') <= 60)} |
| all-in-one service CPU per metered call ÷ nginx proxy_pass (A / N), wrk at saturation | ${fmt(aOverN, 2)} (rounds ${spread(aN)}; ${fmt(own('A'))} / ${fmt(own('N'))} µs) | ≤ 2.5 | ${goal(aOverN <= 2.5)} |
| B3 CPU per call / BP CPU per call: what metering and gating add to a bare hop | ${fmt(b3OverBp, 2)} (rounds ${spread(b3Bp)}; ${fmt(own('B3'))} / ${fmt(own('BP'))} µs) | ≤ 1.10 | ${goal(b3OverBp <= 1.1)} |
| metered calls/s, one proxy process pinned to one core (B3) | ${Math.round(r.pinned.B3 ?? 0)} | ≥ 20,000 | ${goal((r.pinned.B3 ?? 0) >= 20_000)} |
| added p50 / p99 at ${heavy}/s (25% of B1's max), B3 − B1 | ${fmt(
    added(heavy, 'B3', (x) => x.p50),
    3,
  )} / ${fmt(
    added(heavy, 'B3', (x) => x.p99),
    3,
  )} ms | ≤ 0.2 / ≤ 1 ms | ${goal(added(heavy, 'B3', (x) => x.p50) <= 0.2 && added(heavy, 'B3', (x) => x.p99) <= 1)} |
| added p50 / p99 at ${light}/s (25% of B3's own max), B3 − B1 | ${fmt(
    added(light, 'B3', (x) => x.p50),
    3,
  )} / ${fmt(
    added(light, 'B3', (x) => x.p99),
    3,
  )} ms | | |
| Redis commands per call (B3) | ${r.redisCommandsPerCall.toFixed(4)} | ≤ 0.1 | ${goal(r.redisCommandsPerCall <= 0.1)} |
| control-plane limit check (\`POST /v1/sdk/limits\`), checks/s on one pinned core | ${r.limits === undefined ? 'not measured' : `${Math.round(r.limits.rps)} (${r.limits.counted} counted for ${r.limits.answered} answered, ${r.limits.errors} errors)`} | ≥ 5,000, exact | ${goal((r.limits?.rps ?? 0) >= 5000)} |
| completeness: B3 records in ClickHouse / calls the origin answered, over an open-model trial | ${r.completeness.ratio.toFixed(4)} (${r.completeness.recorded} / ${r.completeness.answered}) | 1.0000 | ${goal(r.completeness.ratio === 1)} |

## Maximum throughput and CPU per call, wrk at saturation

Median of ${r.method.rounds} rounds of ${r.method.trialSeconds} s, ${r.method.connections} connections, every target in turn each round.
Ratios (the goals above, B3m / B3 below) are taken round by round, between trials that ran back to
back, then the median; "rounds" gives their spread.

| | ${r.saturation.map((s) => s.target).join(' | ')} |
| --- |${r.saturation.map(() => ' ---: |').join('')}
| calls/s | ${r.saturation.map((s) => Math.round(median(s.rounds.map((x) => x.rps)))).join(' | ')} |
| errors (non-2xx, socket) | ${r.saturation.map((s) => s.rounds.reduce((a, x) => a + x.errors, 0)).join(' | ')} |
| **CPU µs per call, the hop's own process** | ${r.saturation.map((s) => `**${fmt(own(s.target))}**`).join(' | ')} |
| the same, lowest–highest round | ${r.saturation.map((s) => ownSpread(s.target)).join(' | ')} |
| of which system time (the kernel: socket calls) | ${r.saturation.map((s) => fmtPart(ownPart(s.target, 'system'))).join(' | ')} |
| of which user time (the hop's code and runtime) | ${r.saturation.map((s) => fmtPart(ownPart(s.target, 'user'))).join(' | ')} |
| CPU µs per call, every process | ${r.saturation.map((s) => fmt(all(s.target))).join(' | ')} |

System time is the kernel's work on the process's behalf: for every hop nearly all of it the
same four socket calls a call (read the request, write it to the origin, read the answer, write
it to the client), where a write on loopback also delivers the bytes to the reader and wakes it.
User time is the hop's own code, its runtime and libraries: metering and gating are user time.

CPU µs per call by process (median over rounds):

| process | ${r.saturation.map((s) => s.target).join(' | ')} |
| --- |${r.saturation.map(() => ' ---: |').join('')}
${cpuRows}

Trials in which processes outside the stack ("other") took more than a tenth of the hop's own CPU:
${disturbed.join(', ') || 'none'}.

Targets: B1 the origin directly; N nginx \`proxy_pass\` with upstream keep-alive (1 worker); BP a
bare uWebSockets.js + undici hop; BPn the same hop with a lean HTTP/1.1 keep-alive client over
\`net\` in place of undici (\`bench/load/passthrough.ts\`, a prototype for the comparison); B2 the proxy with metering off; B3 the proxy, every call metered
(Kafka → ingest → ClickHouse); B3m B3 with MCP 2026-07-28 calls; A the all-in-one service
(\`npm start\`: proxy, control plane, ingest and chdb in one process, every call metered). B3's
records are consumed by the control-plane process, A's in its own process: "every process" counts
them. The services (B2, B3, A, the control plane) start as \`npm start\` starts them, with the V8
flags of \`deploy/node-flags.ts\`; the bare hops BP and BPn with Node's defaults. B3m / B3 (the modern era's cost): ${fmt(paired('B3m', 'B3').median, 2)} (rounds ${spread(paired('B3m', 'B3'))}).

## One core

The hop's process alone on core 0 (all its threads); wrk, the origin and every other process of
the stack on core 1; the best of two trials. "Busy" is CPU time per second of the trial: the hop's
own core near 100% means the figure is what one core of it gives; short of that, something else
held it back (core 1, where wrk and the origin run, near its whole core).

| | ${Object.keys(r.pinned).join(' | ')} |
| --- |${Object.keys(r.pinned)
    .map(() => ' ---: |')
    .join('')}
| calls/s | ${Object.values(r.pinned)
    .map((v) => Math.round(v))
    .join(' | ')} |
${
  r.pinnedBusy === undefined
    ? ''
    : `| the hop's core busy | ${Object.keys(r.pinned)
        .map((k) => (r.pinnedBusy?.[k] === undefined ? '' : percent(r.pinnedBusy[k].hop)))
        .join(' | ')} |
| everything else, in cores | ${Object.keys(r.pinned)
        .map((k) => (r.pinnedBusy?.[k] === undefined ? '' : fmt(r.pinnedBusy[k].rest, 2)))
        .join(' | ')} |
`
}
The control plane's limit check (\`POST /v1/sdk/limits\`, one unit consumed per check, 32
connections): the control-plane process (with ingest and chdb, as it runs here) alone on core 0,
PostgreSQL, Redis, Kafka and wrk on core 1, after a 5 s warm-up; the best of two trials${r.limits?.busy === undefined ? '' : ` (the control plane's core ${percent(r.limits.busy.hop)} busy, everything else ${fmt(r.limits.busy.rest, 2)} of a core)`}. Exact:
the units counted (read back once the pipeline stored the checks' records) against the checks
wrk saw answered, the difference being checks in flight when wrk stopped.

## Added latency over the origin (vegeta, open model)

p50 / p99 / p99.9 in ms, the better of two ${r.method.latencySeconds} s trials at each rate, interleaved; a
trial whose calls did not all start on time or did not all succeed is invalid and not used${
    r.method.notRepeatedBelow === undefined
      ? '.'
      : `, and
one that started fewer than ${Math.round(r.method.notRepeatedBelow * 100)}% of its calls on schedule is not repeated (the machine
cannot carry that target at that rate).`
  }

| rate | N − B1 | BP − B1 | B3 − B1 | B1 p50 / p99 |
| --- | --- | --- | --- | --- |
${latencyRows}

Invalid trials: ${
    r.latency
      .filter((x) => !x.valid)
      .map(
        (x) =>
          `${x.target} @${x.rate}/s (${Math.round((x.achievedRate / x.rate) * 100)}% of the rate${x.success < 1 ? `, ${(x.success * 100).toFixed(1)}% succeeded` : ''})`,
      )
      .join(', ') || 'none'
  }.

B3's garbage-collection pauses during each of its trials (from its \`/metrics\`; every call in the
process waits out a pause): ${
    r.latency
      .filter((x) => x.target === 'B3' && x.gc !== undefined)
      .map((x) => {
        const gc = x.gc as GcDuring;
        return `${x.rate}/s: ${gc.minor} minor (${fmt(gc.minorMs, 0)} ms), ${gc.major} major (${fmt(gc.majorMs, 0)} ms), longest ${fmt(gc.longestMs, 1)} ms`;
      })
      .join('; ') || 'not read'
  }.

Where B3's time went in the same trials (its \`/metrics\` histograms: *own* from arrival to the
origin request, *origin* from there to the end of the origin's answer, which includes the
proxy's loop being busy when the answer arrives, *answer* from there to the end of the client's
answer, the spool write included): requests over 1 ms in each span, and the histogram bucket
the 99th percentile falls within.

| rate | own: over 1 ms, p99 ≤ | origin: over 1 ms, p99 ≤ | answer: over 1 ms, p99 ≤ |
| --- | --- | --- | --- |
${
  r.latency
    .filter((x) => x.target === 'B3' && x.spans !== undefined)
    .map((x) => {
      const spans = x.spans as SpansDuring;
      const cell = (span: Span) =>
        `${spans[span].over1ms} of ${spans[span].count}, ${fmt(spans[span].p99AtMostMs, 2)} ms`;
      return `| ${x.rate}/s${x.valid ? '' : ' (invalid)'} | ${cell('own')} | ${cell('origin')} | ${cell('answer')} |`;
    })
    .join('\n') || '| not read | | | |'
}

## Method

- Load generators: wrk (Debian; 1 thread, closed model: each connection sends its next call when
  the last is answered) for maximum throughput and CPU per call; vegeta (Go module
  \`github.com/tsenart/vegeta/v12\`, built with \`go install\`; open model: calls start on
  schedule whatever the target does) for latency. Both read the tool-neutral scenarios in
  \`bench/scenarios/\` (\`bench/scenarios/README.md\` runs them by hand against a deployed proxy).
- CPU: user + system time of every process from \`/proc\`, sampled around each trial (for B3, B3m
  and A also after it, until the hop has published every record of the trial, which for A means
  stored, and 2 s more while the consumer stores B3's), divided by the calls wrk counted. The load generator is counted through the bench's children.
- Noise: everything shares two cores; rounds take every target in turn so drift reaches all alike,
  compared targets side by side (nginx and A, BP and B3, B3 and B3m), every other round in reverse
  order; medians over rounds, ratios round by round. A throughput figure is the machine's, not the
  product's: read the ratios.
- The machine's own noise: ${noise}
- No timing is asserted in tests. \`npm run bench:proxy -- --cpu-only\` is the quick loop (one
  round, printed, nothing written).
`;
}

async function shutdown() {
  for (const child of children) {
    if (child.pid !== undefined && child.exitCode === null) {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {}
    }
  }
  await new Promise((r) => setTimeout(r, 3000));
  for (const child of children) {
    if (child.pid !== undefined && child.exitCode === null) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    }
  }
  try {
    stopInfra();
  } catch {}
  rmSync(work, { recursive: true, force: true });
}

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    void shutdown().then(() => process.exit(130));
  });

main()
  .then(shutdown)
  .catch(async (error: unknown) => {
    console.error(error);
    await shutdown();
    process.exit(1);
  });
