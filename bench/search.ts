/**
 * The max-rate search and the sanity check of its results, apart from bench/proxy.ts (which
 * starts a stack on import) so that they can be tested on their own.
 */

export interface Trial {
  target: string;
  rate: number;
  achieved: number;
  requests: number;
  dropped: number;
  failedChecks: number;
  p50: number;
  p90: number;
  p99: number;
  sustained: boolean;
  /** The B3 proxy's event-loop delay over the trial (ms), from its /metrics. */
  loopDelay?: { p99: number; max: number };
  /** B3: seconds from the trial's end until ClickHouse held a record of every call (Infinity: not by the deadline). */
  catchUpSeconds?: number;
}

/**
 * Highest sustained rate of one target: grow by 1.5× until a rate fails, then bisect four times
 * (or until within 3%). A failed trial is run once more before the rate counts as failed: on two
 * shared cores a single stall of another process (a JIT or GC burst, a ClickHouse merge) can drop
 * iterations at any rate, and one such trial would otherwise end the search early. The same rule
 * applies to every target. `next()` is the rate to try, undefined once the search is over;
 * `record()` takes that trial's result. The searches of all targets advance in turns (see
 * `searchAll`), so no target gets a quieter or busier stretch of the run than the others.
 */
export class RateSearch {
  readonly trials: Trial[] = [];
  private good = 0;
  private bad = 0;
  private rate: number;
  private failures = 0;
  private bisections = 0;

  constructor(start: number) {
    this.rate = start;
  }

  get result(): number {
    return this.good;
  }

  next(): number | undefined {
    if (this.bad === 0) return this.rate > 200_000 ? undefined : this.rate;
    if (this.bisections >= 4 || this.bad - this.good <= this.good * 0.03) return undefined;
    return this.rate;
  }

  record(trial: Trial): void {
    this.trials.push(trial);
    if (!trial.sustained && ++this.failures < 2) return; // the same rate once more, on a later turn
    const held = trial.sustained;
    this.failures = 0;
    if (this.bad !== 0) this.bisections++;
    if (held) this.good = this.rate;
    else this.bad = this.rate;
    this.rate = this.bad === 0 ? Math.round(this.rate * 1.5) : Math.round((this.good + this.bad) / 2);
  }
}

/**
 * Runs every target's search in turns: one trial per target per round, the order rotating each
 * round. Machine noise on this shared box drifts over minutes (the same target's max rate has
 * differed by half between runs); searched one after the other, each target met a different
 * stretch of it, and a ratio of two targets measured that drift as much as the targets.
 */
export async function searchAll<T extends string>(
  targets: readonly T[],
  start: number,
  run: (target: T, rate: number) => Promise<Trial>,
): Promise<Record<T, RateSearch>> {
  const searches = Object.fromEntries(targets.map((t) => [t, new RateSearch(start)])) as Record<
    T,
    RateSearch
  >;
  for (let round = 0; ; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length] as T);
    let ran = false;
    for (const target of order) {
      const rate = searches[target].next();
      if (rate === undefined) continue;
      // k6 runs synchronously: yield to the event loop between trials, or a SIGINT/SIGTERM
      // (handled there) would wait for the whole search and the stack would outlive the script.
      await new Promise((r) => setImmediate(r));
      searches[target].record(await run(target, rate));
      ran = true;
    }
    if (!ran) return searches;
  }
}

/**
 * Each target does all the work of the one before it and more (B0 ⊂ B1 ⊂ BP ⊂ B2 ⊂ B3), so a
 * later one out-running an earlier one is the machine's noise being larger than the difference
 * between them: said in the report, never read as a result.
 */
export function inversions(rates: Record<string, number>): string {
  const chain = ['B0', 'B1', 'BP', 'B2', 'B3'];
  const found = chain
    .slice(1)
    .map((later, i) => [chain[i] ?? '', later] as const)
    .filter(([earlier, later]) => (rates[later] ?? 0) > (rates[earlier] ?? 0))
    .map(([earlier, later]) => `${later} (${rates[later]}) above ${earlier} (${rates[earlier]})`);
  if (found.length === 0) return '';
  return `
**Noise larger than the effect in this run:** ${found.join('; ')}. Each target does all the work
of the one before it and more, so these cannot be real; a ratio between such a pair measures
the shared machine, not the targets, and a goal resting on one is reported as inconclusive.
`;
}
