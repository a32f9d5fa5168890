/**
 * Minimal Prometheus text exposition, shared by the services: labelled counters, histograms, the
 * event loop's delay and the collector's pauses. No dependencies.
 */

import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

type Labels = Record<string, string>;
const labelText = (labels: Labels) => {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
};

export class Counter {
  private readonly values = new Map<string, number>();
  /** Label sets seen so far, by a cheap join of their names and values (counted on the hot path). */
  private readonly texts = new Map<string, string>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(labels: Labels = {}, by = 1): void {
    let raw = '';
    for (const name in labels) raw += `${name}\u0000${labels[name]}\u0001`;
    let key = this.texts.get(raw);
    if (key === undefined) {
      key = labelText(labels);
      this.texts.set(raw, key);
    }
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }
  /** Label texts of one-label increments, by label name, then value. */
  private readonly single = new Map<string, Map<string | number, string>>();
  /**
   * `inc({ [name]: String(value) }, by)`, for the hot path: no label object, no key joined per
   * call; a status code counts by its number.
   */
  incLabel(name: string, value: string | number, by = 1): void {
    let byValue = this.single.get(name);
    if (byValue === undefined) {
      byValue = new Map();
      this.single.set(name, byValue);
    }
    let key = byValue.get(value);
    if (key === undefined) {
      key = labelText({ [name]: String(value) });
      // Bounded: values come from a fixed set (outcomes, status codes).
      if (byValue.size < 1_000) byValue.set(value, key);
    }
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }
  render(): string {
    let out = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} counter\n`;
    if (this.values.size === 0) out += `${this.name} 0\n`;
    for (const [labels, value] of this.values) out += `${this.name}${labels} ${value}\n`;
    return out;
  }
}

/**
 * Seconds; buckets from 50 µs to 30 s suit both the proxy's own time and an origin's. 2 ms is
 * the latency objective's threshold (deploy/prometheus/mcpmeter-rules.yml): a good-events ratio
 * needs its threshold to be a bound.
 */
export class Histogram {
  static readonly BUCKETS = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
    5, 10, 30,
  ];
  private readonly counts = new Array<number>(Histogram.BUCKETS.length).fill(0);
  private sum = 0;
  private count = 0;
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  observe(seconds: number): void {
    this.sum += seconds;
    this.count++;
    const i = Histogram.BUCKETS.findIndex((b) => seconds <= b);
    if (i >= 0) this.counts[i] = (this.counts[i] ?? 0) + 1;
  }
  render(): string {
    let out = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} histogram\n`;
    let cumulative = 0;
    Histogram.BUCKETS.forEach((bound, i) => {
      cumulative += this.counts[i] ?? 0;
      out += `${this.name}_bucket{le="${bound}"} ${cumulative}\n`;
    });
    out += `${this.name}_bucket{le="+Inf"} ${this.count}\n${this.name}_sum ${this.sum}\n${this.name}_count ${this.count}\n`;
    return out;
  }
}

export const gauge = (name: string, help: string, value: number) =>
  `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name} ${value}\n`;
export const counter = (name: string, help: string, value: number) =>
  `# HELP ${name} ${help}\n# TYPE ${name} counter\n${name} ${value}\n`;

/**
 * Event-loop delay since the previous render (p50, p99, max), sampled every `resolutionMs`: a
 * summary whose window is the time between scrapes (no `_sum` or `_count`, which would have to
 * count from the start).
 */
export class EventLoopDelay {
  private readonly histogram;
  constructor(
    readonly name: string,
    private readonly resolutionMs = 10,
  ) {
    this.histogram = monitorEventLoopDelay({ resolution: resolutionMs });
    this.histogram.enable();
  }
  render(): string {
    const h = this.histogram;
    let out = `# HELP ${this.name} Event-loop delay since the previous scrape, by quantile\n# TYPE ${this.name} summary\n`;
    for (const [quantile, ns] of [
      ['0.5', h.percentile(50)],
      ['0.99', h.percentile(99)],
      ['1', h.max],
    ] as const) {
      // The sampling timer's interval itself is part of every sample; what is left is delay.
      const seconds = h.count === 0 ? 0 : Math.max(0, ns / 1e9 - this.resolutionMs / 1000);
      out += `${this.name}{quantile="${quantile}"} ${seconds.toFixed(6)}\n`;
    }
    h.reset();
    return out;
  }
  close(): void {
    this.histogram.disable();
  }
}

/** The kinds of garbage collection Node reports, by the names the metrics give them. */
const GC_KINDS = new Map<number, string>([
  [constants.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [constants.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
]);

/**
 * Garbage-collection pauses of this process, by kind: how many and how long in all (counters),
 * and the longest since the previous render. A pause stops every request in the process, so a
 * p99 that climbs with the longest pause is the collector's, not the network's.
 */
export class GcPauses {
  private readonly pauses: Counter;
  private readonly seconds: Counter;
  private readonly longest = new Map<string, number>();
  private readonly observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const detail = (entry as { detail?: { kind?: number } }).detail;
      const kind = GC_KINDS.get(detail?.kind ?? -1) ?? 'other';
      const pause = entry.duration / 1000;
      this.pauses.inc({ kind });
      this.seconds.inc({ kind }, pause);
      this.longest.set(kind, Math.max(this.longest.get(kind) ?? 0, pause));
    }
  });

  /** `prefix`: the metrics are `<prefix>_pauses_total`, `<prefix>_pause_seconds_total` and `<prefix>_pause_max_seconds`. */
  constructor(readonly prefix: string) {
    this.pauses = new Counter(`${prefix}_pauses_total`, 'Garbage-collection pauses, by kind');
    this.seconds = new Counter(
      `${prefix}_pause_seconds_total`,
      'Time the process was paused for garbage collection, by kind',
    );
    this.observer.observe({ entryTypes: ['gc'] });
  }

  render(): string {
    const longest = `${this.prefix}_pause_max_seconds`;
    let out = `# HELP ${longest} The longest garbage-collection pause since the previous scrape, by kind\n# TYPE ${longest} gauge\n`;
    // Unrounded, as the counters are: a rounded-up longest pause could exceed their total.
    for (const [kind, seconds] of this.longest) out += `${longest}{kind="${kind}"} ${seconds}\n`;
    // Kinds seen before and not since: their longest pause since the previous scrape is none.
    for (const kind of this.longest.keys()) this.longest.set(kind, 0);
    return this.pauses.render() + this.seconds.render() + out;
  }

  close(): void {
    this.observer.disconnect();
  }
}
