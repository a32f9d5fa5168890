/**
 * The search for a target's maximum under an open model (vegeta at a fixed arrival rate, whatever
 * the answers do), shared by the proxy's hops (latency.ts) and the control plane's limit check
 * (limit-check.ts): the shares of it that their latency trials run at are then shares of what the
 * target carries with calls arriving on their own schedule, not of a closed-model rate, where the
 * calls in flight queue behind each other and share each turn of its event loop.
 */
import { hopAndRest } from './harness/cores';
import { coresBusyBetween, coresStolenBetween, coreTimes } from './harness/cpu';
import type { LatencyTrial } from './harness/load';

/**
 * How near the lowest rate not carried a maximum's search ends, as a share of the highest carried:
 * a maximum is found to within 8 %, and its shares' rates with it.
 */
export const SEARCH_RESOLUTION = 0.08;
/** A rate is carried when its median stays under this (ms): past it, calls queue in the target. */
export const CARRIED_P50_MS = 1;

/**
 * One trial at a rate: carried (on schedule, every call answered, the median under 1 ms), and on
 * schedule; `reached`, where the generator tells it, the rate its calls started at
 * (`LatencyTrial.reached`).
 */
export interface RateVerdict {
  carried: boolean;
  onSchedule: boolean;
  reached?: number;
}

/** One rate tried in a search for a target's maximum. */
export interface RateTried {
  rate: number;
  carried: boolean;
  achievedRate: number;
  success: number;
  p50: number;
  /**
   * How busy core 0 (the target alone) and core 1 (vegeta, the origin, the rest) were over the trial,
   * 0 to 1 (absent in results from before 2026-11-30's morning): which of them a maximum is.
   */
  cores?: [number, number];
  /** How much of cores 0 and 1 the hypervisor took over the trial (absent in earlier results). */
  stolen?: [number, number];
}

/**
 * One trial of a search: `run` (the target's trial at `rate`, vegeta pinned to core 1), with both
 * cores' busy and stolen shares over it, kept in `tried`; its verdict.
 */
export function triedAt(rate: number, tried: RateTried[], run: () => LatencyTrial): RateVerdict {
  const before = coreTimes();
  const trial = run();
  const after = coreTimes();
  const [core0, core1] = hopAndRest(coresBusyBetween(before, after));
  const [stolen0, stolen1] = hopAndRest(coresStolenBetween(before, after));
  const carried = trial.valid && trial.p50 <= CARRIED_P50_MS;
  tried.push({
    rate,
    carried,
    achievedRate: trial.achievedRate,
    success: trial.success,
    p50: trial.p50,
    cores: [core0, core1],
    stolen: [stolen0, stolen1],
  });
  return trial.reached === undefined
    ? { carried, onSchedule: trial.valid }
    : { carried, onSchedule: trial.valid, reached: trial.reached };
}

const round100 = (rate: number) => Math.max(100, Math.round(rate / 100) * 100);

/**
 * The highest rate `trial` finds carried: `start` first (the target's closed-model rate on its
 * pinned core, or an estimate of what that core sustains), then a bisection between `floor` of it
 * (an eighth by default; assumed carried, tried last if nothing above it was) and the lowest rate
 * not carried, at most six steps, ending once the two are
 * within `SEARCH_RESOLUTION` of each other. A trial that fell behind schedule also bounds the
 * search by the rate its calls did start at, where the generator tells it (vegeta): it can start
 * no more calls a second than the target answers once every connection it may open waits, so that
 * rate is the target's throughput saturated, with calls queueing (not carried), and every rate
 * above it is out of reach too. Without it, a start far above the maximum (a closed-model rate
 * several times what an open model carries, as nginx's) took two or three halvings to reach the
 * maximum's neighbourhood. A rate missed only by its median (every call on
 * schedule and answered) is tried once more before it counts as not carried: one stall of the
 * machine in a 3 s trial could otherwise settle the search far below what the target carries,
 * and every share of the maximum with it (docs/proxy.md, latency under load). 0: nothing carried.
 */
export async function searchOpenMax(
  start: number,
  trial: (rate: number) => Promise<RateVerdict>,
  /** The bisection's floor, as a share of `start`: an eighth for a closed-model rate. */
  floor = 1 / 8,
): Promise<number> {
  let anyCarried = false;
  const once = async (rate: number) => {
    const verdict = await trial(rate);
    anyCarried ||= verdict.carried;
    return verdict;
  };
  /** The lowest rate known out of reach: the least that a trial behind schedule reached. */
  let reached = Number.POSITIVE_INFINITY;
  const attempt = async (rate: number) => {
    const first = await once(rate);
    if (!first.onSchedule && first.reached !== undefined)
      reached = Math.min(reached, round100(first.reached));
    return first.carried || (first.onSchedule && (await once(rate)).carried);
  };
  let high = round100(start);
  if (await attempt(high)) return high;
  let low = round100(high * floor);
  /** The lower of the rate not carried and the rate reached, if that is still above the floor. */
  const bound = (rate: number) => (reached > low && reached < rate ? reached : rate);
  high = bound(high);
  for (let step = 0; step < 6; step++) {
    if (high - low <= low * SEARCH_RESOLUTION) break;
    const middle = round100((low + high) / 2);
    if (middle <= low || middle >= high) break;
    if (await attempt(middle)) low = middle;
    else high = bound(middle);
  }
  // The floor was only assumed: tried when nothing above it was carried.
  if (!anyCarried && !(await attempt(low))) return 0;
  return low;
}
