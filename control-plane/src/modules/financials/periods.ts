/**
 * Report periods by name, in UTC calendar months: `this-month`, `last-month`, `this-quarter`,
 * `last-quarter`, `q1-2026` … `q4-2026`, `this-year`, `last-year`, `last-<n>-months` (the n whole
 * months before the current one; `last-1-months` is `last-month`). Each has a `prior`: the period
 * of the same number of months just before it.
 */
export interface ReportPeriod {
  label: string;
  start: Date;
  end: Date;
  months: number;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MAX_MONTHS = 120;

const monthStart = (year: number, month: number) => new Date(Date.UTC(year, month, 1));
const monthName = (d: Date) => `${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;

function span(start: Date, months: number, label?: string): ReportPeriod {
  const end = monthStart(start.getUTCFullYear(), start.getUTCMonth() + months);
  const last = monthStart(start.getUTCFullYear(), start.getUTCMonth() + months - 1);
  return {
    start,
    end,
    months,
    label: label ?? (months === 1 ? monthName(start) : `${monthName(start)} – ${monthName(last)}`),
  };
}

/** The named period as of `now`, or undefined when the name is not one of the forms above. */
export function reportPeriod(name: string, now: Date): ReportPeriod | undefined {
  const year = now.getUTCFullYear();
  const month = now.getUTCMonth();
  const quarter = Math.floor(month / 3);
  switch (name) {
    case 'this-month':
      return span(monthStart(year, month), 1);
    case 'last-month':
      return span(monthStart(year, month - 1), 1);
    case 'this-quarter':
      return span(monthStart(year, quarter * 3), 3, `Q${quarter + 1} ${year}`);
    case 'last-quarter': {
      const start = monthStart(year, quarter * 3 - 3);
      return span(start, 3, `Q${Math.floor(start.getUTCMonth() / 3) + 1} ${start.getUTCFullYear()}`);
    }
    case 'this-year':
      return span(monthStart(year, 0), 12, String(year));
    case 'last-year':
      return span(monthStart(year - 1, 0), 12, String(year - 1));
  }
  const q = /^q([1-4])-(\d{4})$/.exec(name);
  if (q !== null) {
    const y = Number(q[2]);
    if (y < 2000 || y > 2100) return undefined;
    return span(monthStart(y, (Number(q[1]) - 1) * 3), 3, `Q${q[1]} ${y}`);
  }
  const last = /^last-(\d{1,3})-months$/.exec(name);
  if (last !== null) {
    const n = Number(last[1]);
    if (n < 1 || n > MAX_MONTHS) return undefined;
    return span(monthStart(year, month - n), n);
  }
  return undefined;
}

/** The period of the same length just before. */
export function priorOf(period: ReportPeriod): ReportPeriod {
  const start = monthStart(period.start.getUTCFullYear(), period.start.getUTCMonth() - period.months);
  const prior = span(start, period.months);
  if (period.months === 3 && period.label.startsWith('Q'))
    return { ...prior, label: `Q${Math.floor(start.getUTCMonth() / 3) + 1} ${start.getUTCFullYear()}` };
  if (period.months === 12 && /^\d{4}$/.test(period.label))
    return { ...prior, label: String(start.getUTCFullYear()) };
  return prior;
}

/** The calendar months of a period, each as a one-month period labelled `2026-03`. */
export function monthsOf(period: ReportPeriod): ReportPeriod[] {
  return Array.from({ length: period.months }, (_, i) => {
    const start = monthStart(period.start.getUTCFullYear(), period.start.getUTCMonth() + i);
    return { ...span(start, 1), label: start.toISOString().slice(0, 7) };
  });
}

export const PERIOD_FORMS =
  'this-month, last-month, this-quarter, last-quarter, q1-2026 (any quarter q1–q4 of 2000–2100), this-year, last-year, last-<n>-months (n 1–120)';
