import { describe, expect, it } from 'vitest';
import { coresBusyBetween, coresStolenBetween, parseCoreTimes } from '../bench/harness/cpu';
import type { LatencyTrial, WakeProbe } from '../bench/harness/load';
import type { SpansDuring } from '../bench/harness/metrics-page';
import { spanBuckets, spansBetween } from '../bench/harness/metrics-page';
import type { OpenModelLatency, ShareTrials } from '../bench/latency';
import {
  latencyGoalRows,
  latencySection,
  latencyVerdict,
  mostStolen,
  sliNote,
} from '../bench/latency-report';

const trial = (p99: number, p999: number, valid = true): LatencyTrial => ({
  target: 'x',
  rate: 1000,
  requests: 8000,
  achievedRate: 1000,
  success: 1,
  p50: 0.3,
  p99,
  p999,
  valid,
});

const half = (hop: LatencyTrial[], origin: LatencyTrial[]): ShareTrials => ({
  target: 'B3',
  share: 0.5,
  rate: 1000,
  hop,
  origin,
  hopCpuMicros: 40,
  hopCoreBusy: 0.4,
  waitedMsPerSecond: 10,
  originWaited: { withHop: 10, alone: 5 },
});

// The latency goal's verdict: B3's tail over the origin's at half B3's maximum, each side's best trial.
describe('the bench latency goal verdict', () => {
  it('is met when B3 adds within the goal and the origin alone was within it too', () => {
    expect(latencyVerdict(half([trial(2.5, 9), trial(3, 8)], [trial(0.9, 3)])).label).toBe('met');
  });

  it('is not met when B3 adds more than 2 ms at p99 or 10 at p99.9', () => {
    expect(latencyVerdict(half([trial(3.1, 5)], [trial(1, 3)])).met).toBe(false);
    expect(latencyVerdict(half([trial(1.5, 14)], [trial(1, 3)])).label).toBe('**not met**');
  });

  it('is not resolved when the origin alone had a tail over the goal', () => {
    // The slower machine's run of 2026-11-30: added 1.3 / −23 ms over an origin at 5.1 / 40.7.
    const verdict = latencyVerdict(half([trial(6.4, 17.7)], [trial(5.1, 40.7)]));
    expect(verdict.met).toBe(false);
    expect(verdict.label).toBe('**not resolved**');
    expect(verdict.reason).toContain('p99 5.100 / p99.9 40.700');
  });

  it('is not met when no trial of a side was valid', () => {
    expect(latencyVerdict(half([trial(1, 2, false)], [trial(1, 2)])).met).toBe(false);
    expect(latencyVerdict(half([trial(1, 2)], [trial(1, 2, false)])).met).toBe(false);
  });
});

describe("the bench's per-core busy shares from /proc/stat samples", () => {
  it('divides each CPU’s busy time by its elapsed time', () => {
    const before: Array<[number, number]> = [
      [100, 1000],
      [500, 1000],
    ];
    const after: Array<[number, number]> = [
      [150, 1100],
      [590, 1100],
    ];
    expect(coresBusyBetween(before, after)).toEqual([0.5, 0.9]);
  });

  it('reads 0 for a CPU whose time did not advance', () => {
    expect(coresBusyBetween([[5, 10]], [[5, 10]])).toEqual([0]);
  });

  // /proc/stat's columns: user nice system idle iowait irq softirq steal guest guest_nice.
  const stat = (cpu1: string) =>
    `cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 100 0 50 800 10 0 40 0 0 0\ncpu1 ${cpu1}\nintr 1 2 3\n`;

  it('counts steal time in a CPU’s total, not its busy time, and gives it apart', () => {
    expect(parseCoreTimes(stat('200 10 60 600 0 5 25 100 30 0'))).toEqual([
      [190, 1000, 0],
      [300, 1000, 100],
    ]);
  });

  it('divides each CPU’s stolen time by its elapsed time', () => {
    const before = parseCoreTimes(stat('200 10 60 600 0 5 25 100 0 0'));
    // Core 1: 100 jiffies on, 20 of them stolen, 50 busy, 30 idle.
    const after = parseCoreTimes(stat('240 10 70 630 0 5 25 120 0 0'));
    expect(coresStolenBetween(before, after)).toEqual([0, 0.2]);
    expect(coresBusyBetween(before, after)).toEqual([0, 0.5]);
  });
});

describe('the bench report’s steal time', () => {
  it('gives the most stolen of each core over the trials that read it', () => {
    const read = (stolen: [number, number]) => ({ ...trial(1, 2), stolen });
    expect(mostStolen([read([0.01, 0.2]), trial(1, 2), read([0.05, 0.03])])).toEqual([0.05, 0.2]);
    expect(mostStolen([trial(1, 2)])).toBeUndefined();
  });

  it('says in the latency goal’s row how much the hypervisor took, where the run read it', () => {
    const stolen = (s: [number, number]) => ({ ...trial(1.5, 5), stolen: s });
    const latency = (hop: LatencyTrial[]) => ({
      trialSeconds: 10,
      searchSeconds: 3,
      maxima: { N: { max: 2000, tried: [] }, BP: { max: 2000, tried: [] }, B3: { max: 2000, tried: [] } },
      shares: [half(hop, [trial(1, 3)])],
    });
    expect(latencyGoalRows(latency([stolen([0.06, 0.02]), stolen([0.01, 0.12])]))).toContain(
      'the hypervisor took up to 6 % of core 0 and 12 % of core 1 in a trial (steal time)',
    );
    expect(latencyGoalRows(latency([trial(1.5, 5)]))).not.toContain('hypervisor');
  });
});

/** An open-model result with B3 adding 2.5 / 8 ms at its 50 %, and `extra` (a run's optional parts). */
const atHalf = (extra: Partial<OpenModelLatency> = {}): OpenModelLatency => ({
  trialSeconds: 8,
  searchSeconds: 3,
  maxima: { N: { max: 2000, tried: [] }, BP: { max: 2000, tried: [] }, B3: { max: 2000, tried: [] } },
  shares: [half([trial(4, 12)], [trial(1.5, 4)])],
  ...extra,
});

describe('the bench report’s peer at the goal’s rate', () => {
  const latency = (peerAtGoalRate?: ShareTrials) =>
    atHalf(peerAtGoalRate === undefined ? {} : { peerAtGoalRate });

  it('says in the goal’s row what nginx added at that rate, over the origin at that rate', () => {
    const peer = { ...half([trial(3.5, 9)], [trial(1.25, 5)]), target: 'N' as const };
    const row = latencyGoalRows(latency(peer));
    expect(row).toContain(
      "nginx at the same rate and arrangement added 2.250 / 4.000 ms p99 / p99.9 (its own p99 3.500 ms, the origin's at that rate 1.250)",
    );
    // The verdict is still B3's own: 2.5 ms added at p99.
    expect(row).toContain('**not met**');
  });

  it('is absent from the goal’s row and the table where the run did not measure it', () => {
    expect(latencyGoalRows(latency())).not.toContain('nginx');
    expect(latencySection(latency())).not.toContain("N at B3's 50 %");
    const peer = { ...half([trial(3.5, 9)], [trial(1.25, 5)]), target: 'N' as const, share: 0.75 };
    expect(latencySection(latency(peer))).toContain("| N at B3's 50 % | 75 % | 1000 | ");
    expect(latencySection(latency(peer))).not.toContain('the better read');
  });

  it('says how many trials it read the better of, where there were more than one', () => {
    const peer = { ...half([trial(5, 9), trial(3.5, 9)], [trial(1.25, 5)]), target: 'N' as const };
    expect(latencySection(latency(peer))).toContain(
      "over the origin's trials of B3's 50 % (2 trials, the better read)",
    );
    // The better trial is the one read: 3.5 − 1.25 ms at p99.
    expect(latencyGoalRows(latency(peer))).toContain('nginx at the same rate and arrangement added 2.250 /');
  });
});

describe('the bench report’s machine floor at the goal’s rate', () => {
  const latency = (machineFloor?: WakeProbe) => atHalf(machineFloor === undefined ? {} : { machineFloor });
  const probe: WakeProbe = {
    rate: 1000,
    seconds: 4,
    direct: [15, 125, 1250, 2500],
    hop: [100, 1375, 4000, 7000],
  };

  it('says in the goal’s row what a do-nothing hop added, hop less direct at each quantile', () => {
    const row = latencyGoalRows(latency(probe));
    expect(row).toContain('a hop that does nothing (C on pipes, the same cores and rate');
    expect(row).toContain('added 1.250 / 2.750 ms p99 / p99.9');
    // The verdict stays B3's own: 2.5 ms added at p99, whatever the floor.
    expect(row).toContain('**not met**');
  });

  it('tabulates both round trips in the latency section', () => {
    const section = latencySection(latency(probe));
    expect(section).toContain(
      '| direct (caller → origin → caller, core 1) | 0.015 / 0.125 / 1.250 / 2.500 |',
    );
    expect(section).toContain('| through the do-nothing hop (core 0) | 0.100 / 1.375 / 4.000 / 7.000 |');
    expect(section).toContain('| added by the hop, p99 / p99.9 | 1.250 / 2.750 |');
  });

  it('is absent where the run did not measure it', () => {
    expect(latencyGoalRows(latency())).not.toContain('does nothing');
    expect(latencySection(latency())).not.toContain('wake-probe');
  });
});

describe('the bench report’s relay at the goal’s rate', () => {
  const latency = (relayAtGoalRate?: ShareTrials) =>
    atHalf(relayAtGoalRate === undefined ? {} : { relayAtGoalRate });
  // The relay's trial over the origin's trials of B3's at 50 %: 1.8 − 1.5 and 6 − 4 ms.
  const relay = { ...half([trial(1.8, 6)], [trial(1.5, 4)]), target: 'F' as const };

  it('says in the goal’s row what the TCP hop that only passes bytes added over the origin', () => {
    const row = latencyGoalRows(latency(relay));
    expect(row).toContain('a TCP hop in C that only passes bytes');
    expect(row).toContain('added 0.300 / 2.000 ms p99 / p99.9');
    // The verdict stays B3's own: 2.5 ms added at p99, whatever the relay added.
    expect(row).toContain('**not met**');
  });

  it('has a row in the latency table, with no share of a maximum of its own', () => {
    const section = latencySection(latency(relay));
    expect(section).toContain("| F (relay) at B3's 50 % | n/a | 1000 | 0.000 / 0.300 / 2.000 |");
    expect(section).toContain('`bench/load/relay.c`');
  });

  it('is absent where the run did not measure it', () => {
    expect(latencyGoalRows(latency())).not.toContain('only passes bytes');
    expect(latencySection(latency())).not.toContain('relay');
  });
});

describe('the bench report’s origin of the latency trials', () => {
  it('names the C origin, and says which other figures are over the Node origin', () => {
    const section = latencySection(atHalf({ origin: 'c' }));
    expect(section).toContain('`bench/load/origin.c`, `--latency-origin c`');
    expect(section).toContain(
      'the saturation,\none-core and completeness figures of this page are over the Node origin',
    );
  });

  it('says when the trials were over the Node origin', () => {
    expect(latencySection(atHalf({ origin: 'node' }))).toContain('`--latency-origin node`');
  });

  it('says nothing of it in results from before it was chosen', () => {
    expect(latencySection(atHalf())).not.toContain('--latency-origin');
  });

  it('says how near the maxima were searched, where the run ended its searches early', () => {
    expect(latencySection(atHalf({ searchResolution: 0.08 }))).toContain('3 s trials to within 8 % from');
    expect(latencySection(atHalf())).toContain('3 s trials from');
  });
});

describe('the bench report’s core 1 beside B3', () => {
  const withGroups = (groupsBusy?: ShareTrials['groupsBusy']) =>
    atHalf({ shares: [{ ...half([trial(4, 12)], [trial(1.5, 4)]), ...(groupsBusy ? { groupsBusy } : {}) }] });

  it('says in the goal’s row what each group took of core 1 beside B3 and with the origin alone', () => {
    const row = latencyGoalRows(
      withGroups({
        withHop: {
          'load generator': 0.2,
          origin: 0.3,
          'control-plane': 0.11,
          kafka: 0.03,
          'proxy-b3': 0.55,
          nginx: 0.01,
          other: 0.02,
        },
        alone: { 'load generator': 0.15, origin: 0.12, other: 0.02 },
      }),
    );
    expect(row).toContain(
      "core 1's work beside B3 / with the origin alone, in cores: vegeta 0.20 / 0.15, the origin 0.30 / 0.12, ingest and ClickHouse (the control plane's process) 0.11 / 0.00, Kafka 0.03 / 0.00, Redis 0.00 / 0.00, PostgreSQL 0.00 / 0.00, the rest 0.03 / 0.02",
    );
  });

  it('is absent where the run did not read it', () => {
    expect(latencyGoalRows(withGroups())).not.toContain("core 1's work");
  });
});

describe("the bench's span quantiles from a proxy's histograms over a trial", () => {
  const page = (counts: Record<string, number>) =>
    Object.entries(counts)
      .map(([le, n]) => `mcpmeter_proxy_added_seconds_bucket{le="${le}"} ${n}`)
      .join('\n');

  it('finds the buckets the p99 and p99.9 of what the trial added fall within', () => {
    // Before: 100 requests, all under 0.5 ms. The trial: 10,000 more, 150 over 1 ms, 5 over 2.5.
    const before = spanBuckets(page({ '0.0005': 100, '0.001': 100, '0.0025': 100, '+Inf': 100 }));
    const after = spanBuckets(page({ '0.0005': 9_900, '0.001': 9_950, '0.0025': 10_095, '+Inf': 10_100 }));
    const added = spansBetween(before, after).added;
    expect(added).toEqual({ count: 10_000, over1ms: 150, p99AtMostMs: 2.5, p999AtMostMs: 2.5 });
  });

  it('reads a quantile past the last bound as unbounded', () => {
    const before = spanBuckets(page({ '0.001': 0, '+Inf': 0 }));
    const after = spanBuckets(page({ '0.001': 995, '+Inf': 1_000 }));
    const added = spansBetween(before, after).added;
    // 995 of 1,000 within 1 ms: the p99 (990) is there, the p99.9 (999) only in +Inf.
    expect(added.p99AtMostMs).toBe(1);
    expect(added.p999AtMostMs).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('the bench report’s SLI of B3 at the goal’s rate', () => {
  const span = (p99AtMostMs: number, p999AtMostMs: number) => ({
    count: 34300,
    over1ms: 9,
    p99AtMostMs,
    p999AtMostMs,
  });
  const withSli = (t: LatencyTrial, p99: number, p999: number): LatencyTrial => {
    const s = span(p99, p999);
    const spans: SpansDuring = { own: s, origin: s, answer: s, added: s };
    return { ...t, spans };
  };

  it('gives each trial’s reading and names the trial whose p99 the row gives', () => {
    // The run of 2026-12-07 00:26: the worse trial read 25 / 50 ms, the one the row gives 1 / 2.
    const note = sliNote(
      half([withSli(trial(47.98, 101.37), 25, 50), withSli(trial(5.6, 17.53), 1, 2)], [trial(1.2, 2.5)]),
    );
    expect(note).toBe(
      "; B3's own added time (its SLI histogram), trial by trial: p99 ≤ 25.00, p99.9 ≤ 50.00 ms; p99 ≤ 1.00, p99.9 ≤ 2.00 ms (the trial of the row's p99)",
    );
  });

  it('gives one reading without naming a trial where one trial read it', () => {
    expect(sliNote(half([withSli(trial(3, 9), 2, 5), trial(4, 9)], [trial(1, 2)]))).toBe(
      "; B3's own added time (its SLI histogram): p99 ≤ 2.00, p99.9 ≤ 5.00 ms",
    );
  });

  it('is empty where no trial read it', () => {
    expect(sliNote(half([trial(3, 9)], [trial(1, 2)]))).toBe('');
  });
});
