import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { GcDuring, SpansDuring } from './metrics-page';

/**
 * The load generators of the benches, which cost little: wrk (closed model, maximum throughput)
 * and vegeta (open model, latency at a fixed arrival rate), or in vegeta's place open-load (the
 * same model in C, `--latency-generator open-load`), each sending one scenario's request to one
 * target. All are installed by bench/load/install.sh, which also names nginx, the wake-up probe, the
 * relay and the C origin.
 */

export type Tools = {
  WRK: string;
  VEGETA: string;
  NGINX: string;
  WAKE_PROBE: string;
  OPEN_LOAD: string;
  RELAY: string;
  ORIGIN: string;
};

/**
 * The open-model generator of the latency trials: vegeta (the default), or open-load
 * (bench/load/open-load.c: the same model in C, a third of vegeta's CPU a call, for checking what
 * a verdict owes to the generator).
 */
export type LatencyGenerator = 'vegeta' | 'open-load';

/**
 * Which origin a trial calls: the C origin (bench/load/origin.c, a fixed answer from one epoll
 * loop, its own tail the machine's: the default of the latency and workers trials) or the bench's
 * Node origin (bench/load/servers.ts, which every other measurement uses), put on the origin's
 * port for the trials.
 */
export type OriginKind = 'c' | 'node';

/**
 * The machine's floor for what a hop adds (bench/load/wake-probe.c): round trips of 8 bytes
 * through pipes, caller and origin on one core, directly and through a do-nothing hop alone on
 * the other; p50, p99, p99.9 and the longest, in µs.
 */
export interface WakeProbe {
  rate: number;
  seconds: number;
  direct: [number, number, number, number];
  hop: [number, number, number, number];
}

/** The load tools' paths (installed first if missing: bench/load/install.sh). */
export function installTools(root: string): Tools {
  return Object.fromEntries(
    execFileSync('bash', [join(root, 'bench', 'load', 'install.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    })
      .trim()
      .split('\n')
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  ) as Tools;
}

export interface Scenario {
  method: string;
  headers: Record<string, string>;
  body: unknown;
}
/** A request of bench/scenarios/. */
export const scenario = (root: string, file: string) =>
  JSON.parse(readFileSync(join(root, 'bench', 'scenarios', file), 'utf8')) as Scenario;
export interface Target {
  url: string;
  token: string;
  call: Scenario;
}

export const headersOf = (t: Target) => ({
  ...t.call.headers,
  ...(t.token === '' ? {} : { authorization: `Bearer ${t.token}` }),
});

export interface WrkResult {
  requests: number;
  rps: number;
  errors: number;
  p50: number;
  p99: number;
}

export interface LatencyTrial {
  target: string;
  rate: number;
  requests: number;
  achievedRate: number;
  /**
   * vegeta's trials: the rate its calls started at, over the trial. Behind schedule (every
   * connection it may open waiting), it starts a call only as one is answered, so this is the
   * target's throughput saturated (open model searches read it as out of reach). open-load's
   * `achievedRate` counts the calls that did not wait and says nothing of that: absent there.
   */
  reached?: number;
  success: number;
  p50: number;
  p99: number;
  p999: number;
  valid: boolean;
  /** B3's garbage collection during the trial, read from its metrics page. */
  gc?: GcDuring;
  /** B3's own, origin and answer spans during the trial (its metrics page's histograms). */
  spans?: SpansDuring;
  /**
   * B3's tool calls that did not end as a success during the trial (its metrics page), each an
   * HTTP 200 the generator counted as answered: more than none makes the trial invalid.
   */
  unsuccessful?: number;
  /**
   * How much of cores 0 and 1 the hypervisor took over the trial, 0 to 1 (steal time; absent in
   * results from before 2026-11-30's second session).
   */
  stolen?: [number, number];
}

/** The share of a trial's calls that may wait for a connection (fall behind schedule) in a valid trial. */
const BEHIND_AT_MOST = 0.01;

/**
 * An open-load trial read from its output: `summary` its stdout line, `csv` its lines a call
 * (`due_ns,status,latency_ns`). Valid when every call of the schedule was answered 200 and at
 * most 1 % waited for a connection (the target fell behind), as vegeta's trials must start 99 %.
 */
export function openLoadTrial(
  name: string,
  rate: number,
  seconds: number,
  summary: string,
  csv: string,
): LatencyTrial {
  const count = (label: string) => Number(new RegExp(`\\b${label} (\\d+)`).exec(summary)?.[1] ?? Number.NaN);
  const latencies: number[] = [];
  let ok = 0;
  for (const line of csv.split('\n')) {
    if (line === '') continue;
    const [, status, latency] = line.split(',');
    latencies.push(Number(latency) / 1e6);
    if (status === '200') ok++;
  }
  latencies.sort((a, b) => a - b);
  const q = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? Number.NaN;
  const expected = Math.floor(rate * seconds);
  const waited = count('waited');
  return {
    target: name,
    rate,
    requests: latencies.length,
    // The calls that went out on schedule, as a rate: those that did not wait for a connection.
    achievedRate: (rate * (latencies.length - waited)) / Math.max(expected, 1),
    success: ok / Math.max(latencies.length, 1),
    p50: q(0.5),
    p99: q(0.99),
    p999: q(0.999),
    valid: latencies.length === expected && ok === expected && waited <= expected * BEHIND_AT_MOST,
  };
}

/** One whole HTTP/1.1 request for `t`, as it goes on the wire. */
export function wireRequest(t: Target): { host: string; port: number; bytes: Buffer } {
  const url = new URL(t.url);
  const body = Buffer.from(JSON.stringify(t.call.body));
  const headers = { host: url.host, ...headersOf(t), 'content-length': String(body.length) };
  const head = `${t.call.method} ${url.pathname}${url.search} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  return {
    host: url.hostname,
    port: Number(url.port || 80),
    bytes: Buffer.concat([Buffer.from(head, 'latin1'), body]),
  };
}

/**
 * vegeta's most connections: enough for 30 ms stalls at 8,000 calls/s. A trial beyond what the
 * target carries then falls behind schedule (invalid) instead of opening thousands of connections,
 * whose closed sockets (TIME_WAIT on loopback) slowed every trial after it for a minute.
 */
const MAX_WORKERS = 256;

/** Runs the load generators: their scripts and results go to `work`; `log` says what each trial gave. */
export class LoadGenerators {
  constructor(
    private readonly tools: Tools,
    private readonly work: string,
    /** wrk's connections. */
    private readonly connections: number,
    private readonly log: (line: string) => void,
  ) {}

  /**
   * The wake-up probe at `rate` round trips a second of each kind for `seconds`: the hop on core
   * `hopCore`, the caller and the origin on `restCore`.
   */
  wakeProbe(rate: number, seconds: number, hopCore: number, restCore: number): WakeProbe {
    const out = execFileSync(
      this.tools.WAKE_PROBE,
      [String(rate), String(seconds), String(hopCore), String(restCore)],
      { encoding: 'utf8', timeout: (seconds + 30) * 1000 },
    );
    return JSON.parse(out) as WakeProbe;
  }

  /** The scenario as a wrk script (wrk's Lua has no JSON: the request is written out literally). */
  private wrkScript(name: string, t: Target): string {
    const file = join(this.work, `${name}.lua`);
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

  /**
   * wrk, closed model: `CONNECTIONS` connections (or `connections`) each sending the next call
   * when the last is answered, from `threads` threads.
   */
  wrk(
    name: string,
    t: Target,
    seconds: number,
    pin?: string,
    connections = this.connections,
    threads = 1,
  ): WrkResult {
    const argv = [
      `-t${threads}`,
      `-c${connections}`,
      `-d${seconds}s`,
      '--latency',
      '-s',
      this.wrkScript(name, t),
      t.url,
    ];
    const out = execFileSync(
      pin === undefined ? this.tools.WRK : 'taskset',
      pin === undefined ? argv : ['-c', pin, this.tools.WRK, ...argv],
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

  /** An open-model trial with the run's generator (see `LatencyGenerator`). */
  openModel(
    generator: LatencyGenerator,
    name: string,
    t: Target,
    rate: number,
    seconds: number,
    pin?: string,
  ): LatencyTrial {
    return generator === 'open-load'
      ? this.openLoad(name, t, rate, seconds, pin)
      : this.vegeta(name, t, rate, seconds, pin);
  }

  /** open-load, open model: as `vegeta`, with bench/load/open-load.c (judged by `openLoadTrial`). */
  openLoad(name: string, t: Target, rate: number, seconds: number, pin?: string): LatencyTrial {
    const request = wireRequest(t);
    const requestFile = join(this.work, `${name}.request`);
    writeFileSync(requestFile, request.bytes);
    const results = join(this.work, `${name}-${rate}.csv`);
    const argv = [request.host, String(request.port), requestFile, String(rate), String(seconds), results];
    const summary = execFileSync(
      pin === undefined ? this.tools.OPEN_LOAD : 'taskset',
      pin === undefined ? argv : ['-c', pin, this.tools.OPEN_LOAD, ...argv],
      { encoding: 'utf8', timeout: (seconds + 60) * 1000 },
    );
    const trial = openLoadTrial(name, rate, seconds, summary, readFileSync(results, 'utf8'));
    this.log(
      `${name} @${rate}/s (open-load): ${trial.requests} calls, success ${trial.success.toFixed(4)}, p50 ${trial.p50.toFixed(3)} p99 ${trial.p99.toFixed(3)} p99.9 ${trial.p999.toFixed(3)} ms; ${summary.trim()}${trial.valid ? '' : ' INVALID'}`,
    );
    rmSync(results, { force: true });
    return trial;
  }

  /**
   * vegeta, open model: calls start on schedule whatever the target does. A trial whose calls
   * did not all start on time (the achieved rate short of the asked one) or did not all succeed is
   * invalid, reported as such and never as a latency. `pin`: the CPUs vegeta runs on (taskset's list).
   */
  vegeta(name: string, t: Target, rate: number, seconds: number, pin?: string): LatencyTrial {
    const targets = join(this.work, `${name}.targets.json`);
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
    const results = join(this.work, `${name}-${rate}.bin`);
    execFileSync(
      'bash',
      [
        '-c',
        `${pin === undefined ? '' : `taskset -c ${pin} `}"$0" attack -format=json -targets="$1" -rate="$2"/1s -duration="$3"s -timeout=10s -workers=64 -max-workers=${MAX_WORKERS} > "$4"`,
        this.tools.VEGETA,
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
    const csv = execFileSync(this.tools.VEGETA, ['encode', '--to=csv', results], {
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
      reached: achievedRate,
      success: ok / Math.max(latencies.length, 1),
      p50: q(0.5),
      p99: q(0.99),
      p999: q(0.999),
      valid: ok === latencies.length && latencies.length >= rate * seconds * 0.99,
    };
    this.log(
      `${name} @${rate}/s: ${trial.requests} calls, success ${trial.success.toFixed(4)}, p50 ${trial.p50.toFixed(3)} p99 ${trial.p99.toFixed(3)} p99.9 ${trial.p999.toFixed(3)} ms${trial.valid ? '' : ' INVALID'}`,
    );
    rmSync(results, { force: true });
    return trial;
  }
}
