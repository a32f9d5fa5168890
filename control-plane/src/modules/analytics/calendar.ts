import type { AnalyticsGrain } from '@mcp-meter/contracts/usage';

/**
 * Calendar buckets in an IANA time zone, with the platform's time zone data (Intl): the local
 * date that starts each day, week (from Monday) or month, or the instant each local hour starts,
 * as the usage store buckets records. Pure: no clock, no I/O.
 */

const HOUR_MS = 3_600_000;
const formats = new Map<string, Intl.DateTimeFormat>();

function format(timeZone: string): Intl.DateTimeFormat {
  let f = formats.get(timeZone);
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formats.set(timeZone, f);
  }
  return f;
}

interface Local {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

export function localOf(timeZone: string, instant: number): Local {
  const parts: Record<string, number> = {};
  for (const p of format(timeZone).formatToParts(new Date(instant)))
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  return {
    year: parts.year ?? 1970,
    month: parts.month ?? 1,
    day: parts.day ?? 1,
    hour: parts.hour ?? 0,
    minute: parts.minute ?? 0,
    second: parts.second ?? 0,
  };
}

/** How far the zone's wall clock is ahead of UTC at `instant`, in ms. */
function offsetAt(timeZone: string, instant: number): number {
  const l = localOf(timeZone, instant);
  const wall = Date.UTC(l.year, l.month - 1, l.day, l.hour, l.minute, l.second);
  return wall - (instant - (((instant % 1000) + 1000) % 1000));
}

/** The instant a local wall-clock time (whole hours) happens; a skipped hour maps past the gap. */
export function instantOf(timeZone: string, year: number, month: number, day: number, hour = 0): number {
  const wall = Date.UTC(year, month - 1, day, hour);
  const first = wall - offsetAt(timeZone, wall);
  const second = wall - offsetAt(timeZone, first);
  return second === first ? first : Math.max(first, second);
}

/** Whether the platform knows `timeZone` as an IANA zone (canonical names and UTC). */
export function isTimeZone(timeZone: string): boolean {
  if (timeZone === 'UTC' || timeZone === 'Etc/UTC') return true;
  return Intl.supportedValuesOf('timeZone').includes(timeZone);
}

const dateKey = (y: number, m: number, d: number) =>
  `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;

export interface Bucket {
  /** As the store names it: `YYYY-MM-DD`, or the Unix seconds of the hour's start. */
  key: string;
  /** The instant the bucket starts (ISO 8601, UTC). */
  start: string;
  /** The local start, for people: `YYYY-MM-DD`, or `YYYY-MM-DDTHH:MM` for hours. */
  label: string;
}

/**
 * The buckets that meet [from, to), oldest first; undefined once there would be more than `max`
 * (the caller refuses the range).
 */
export function bucketsOf(
  from: Date,
  to: Date,
  grain: AnalyticsGrain,
  timeZone: string,
  max: number,
): Bucket[] | undefined {
  const buckets: Bucket[] = [];
  const end = to.getTime();
  if (grain === 'hour') {
    const floorHour = (t: number) => {
      const l = localOf(timeZone, t);
      return t - (((t % 1000) + 1000) % 1000) - (l.minute * 60 + l.second) * 1000;
    };
    for (let t = floorHour(from.getTime()); t < end; t = floorHour(t + HOUR_MS)) {
      if (buckets.length === max) return undefined;
      const l = localOf(timeZone, t);
      buckets.push({
        key: String(t / 1000),
        start: new Date(t).toISOString(),
        label: `${dateKey(l.year, l.month, l.day)}T${String(l.hour).padStart(2, '0')}:${String(l.minute).padStart(2, '0')}`,
      });
    }
    return buckets;
  }
  const l = localOf(timeZone, from.getTime());
  // Calendar arithmetic on the local date alone, through UTC dates (no zone in it).
  const cursor = new Date(Date.UTC(l.year, l.month - 1, l.day));
  if (grain === 'week') cursor.setUTCDate(cursor.getUTCDate() - ((cursor.getUTCDay() + 6) % 7));
  if (grain === 'month') cursor.setUTCDate(1);
  for (;;) {
    const [y, m, d] = [cursor.getUTCFullYear(), cursor.getUTCMonth() + 1, cursor.getUTCDate()];
    const start = instantOf(timeZone, y, m, d);
    if (start >= end) return buckets;
    if (buckets.length === max) return undefined;
    const key = dateKey(y, m, d);
    buckets.push({ key, start: new Date(start).toISOString(), label: key });
    if (grain === 'day') cursor.setUTCDate(d + 1);
    else if (grain === 'week') cursor.setUTCDate(d + 7);
    else cursor.setUTCMonth(cursor.getUTCMonth() + 1);
  }
}
