import { ANALYTICS_SLOT_MS } from '@mcp-meter/contracts/usage/analytics';

/**
 * The 15-minute slots analytics rolls up. Every time zone in use is offset from UTC by whole
 * quarter hours, so each local hour, day, week and month is a run of whole slots.
 */
export const SLOT_MS = ANALYTICS_SLOT_MS;

/** Runs of rolled slots past this many are answered from the raw records instead: a query's text stays small. */
export const MAX_RUNS = 64;

export interface TimeRange {
  /** ms since the epoch, inclusive. */
  from: number;
  /** ms since the epoch, exclusive. */
  to: number;
}

export const floorSlot = (ms: number): number => Math.floor(ms / SLOT_MS) * SLOT_MS;
export const ceilSlot = (ms: number): number => Math.ceil(ms / SLOT_MS) * SLOT_MS;

/** Slot starts (ms) as contiguous ranges, in order; duplicates allowed. */
export function runsOf(slots: Iterable<number>): TimeRange[] {
  const sorted = [...new Set(slots)].sort((a, b) => a - b);
  const runs: TimeRange[] = [];
  for (const slot of sorted) {
    const last = runs[runs.length - 1];
    if (last !== undefined && last.to === slot) last.to = slot + SLOT_MS;
    else runs.push({ from: slot, to: slot + SLOT_MS });
  }
  return runs;
}

/**
 * Splits [from, to) into what the rollups answer (the whole slots inside it that are rolled and
 * clean) and what the raw records answer (the rest: partial slots at the ends, slots not rolled
 * yet, slots with records newer than their roll). The two never overlap and cover the range.
 */
export function splitRange(
  range: TimeRange,
  cleanSlots: Iterable<number>,
): { rolled: TimeRange[]; raw: TimeRange[] } {
  const inside = [...cleanSlots].filter((s) => s >= range.from && s + SLOT_MS <= range.to);
  const rolled = runsOf(inside);
  if (rolled.length > MAX_RUNS) return { rolled: [], raw: [range] };
  const raw: TimeRange[] = [];
  let at = range.from;
  for (const run of rolled) {
    if (run.from > at) raw.push({ from: at, to: run.from });
    at = run.to;
  }
  if (at < range.to) raw.push({ from: at, to: range.to });
  return { rolled, raw };
}

/** Splits a range at the start of each UTC month, where the tables' partitions end. */
export function byMonth(range: TimeRange): TimeRange[] {
  const parts: TimeRange[] = [];
  let at = range.from;
  while (at < range.to) {
    const day = new Date(at);
    const next = Date.UTC(day.getUTCFullYear(), day.getUTCMonth() + 1, 1);
    parts.push({ from: at, to: Math.min(next, range.to) });
    at = Math.min(next, range.to);
  }
  return parts;
}

/**
 * The slots due to be rolled, as the rebuilds that roll them: the runs of one UTC month each
 * (one partition of the raw tables, read once however many runs it holds), at most MAX_RUNS per
 * rebuild, in order. K late records scattered over a month cost one rebuild, not K.
 */
export function rebuildBatches(slots: Iterable<number>): TimeRange[][] {
  const batches: TimeRange[][] = [];
  let month = Number.NaN;
  for (const run of runsOf(slots))
    for (const piece of byMonth(run)) {
      const at = new Date(piece.from);
      const start = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1);
      const last = batches[batches.length - 1];
      if (last !== undefined && start === month && last.length < MAX_RUNS) last.push(piece);
      else {
        batches.push([piece]);
        month = start;
      }
    }
  return batches;
}

export const DAY_MS = 96 * SLOT_MS;

/** What answers each part of a range: whole UTC days, rolled slots, or the raw records. */
export interface RangePlan {
  days: TimeRange[];
  rolled: TimeRange[];
  raw: TimeRange[];
}

/** `ranges` less the parts inside `cuts` (both sorted, cuts whole inside ranges). */
function subtract(ranges: readonly TimeRange[], cuts: readonly TimeRange[]): TimeRange[] {
  const out: TimeRange[] = [];
  for (const range of ranges) {
    let at = range.from;
    for (const cut of cuts) {
      if (cut.to <= at || cut.from >= range.to) continue;
      if (cut.from > at) out.push({ from: at, to: cut.from });
      at = Math.max(at, cut.to);
    }
    if (at < range.to) out.push({ from: at, to: range.to });
  }
  return out;
}

/**
 * Like splitRange, and then the UTC days inside the range whose 96 slots are all clean and that
 * were summed no earlier than any of their slots was rolled (`dayRolls`, day start → µs) are
 * answered whole from the day rollup. `clean` maps each clean slot to when it was rolled (µs).
 */
export function planRange(
  range: TimeRange,
  clean: ReadonlyMap<number, bigint>,
  dayRolls: ReadonlyMap<number, bigint>,
): RangePlan {
  const { rolled, raw } = splitRange(range, clean.keys());
  const usable: number[] = [];
  for (const [day, summed] of dayRolls) {
    // Inside one run of rolled slots (none when the range is read raw for its many runs).
    if (!rolled.some((run) => run.from <= day && day + DAY_MS <= run.to)) continue;
    let whole = true;
    for (let slot = day; whole && slot < day + DAY_MS; slot += SLOT_MS) {
      const rolledAt = clean.get(slot);
      whole = rolledAt !== undefined && rolledAt <= summed;
    }
    if (whole) usable.push(day);
  }
  const joined: TimeRange[] = [];
  for (const day of [...usable].sort((a, b) => a - b)) {
    const last = joined[joined.length - 1];
    if (last !== undefined && last.to === day) last.to = day + DAY_MS;
    else joined.push({ from: day, to: day + DAY_MS });
  }
  return { days: joined, rolled: subtract(rolled, joined), raw };
}
