import { escapeHtml } from '../../http/html';

/** The customer's calls by day and by tool, as the usage analytics API answers them. */
export interface UsageChart {
  from: string;
  to: string;
  /** Day labels (YYYY-MM-DD), one per bar. */
  days: string[];
  /** The tools with the most calls, each with its calls per day; the rest summed as "other tools". */
  series: Array<{ tool: string; calls: number[]; total: number }>;
  total: number;
}

/** The analytics answer (groupBy=tool, grain=day) as the chart draws it. */
export function chartOf(answer: {
  from: string;
  to: string;
  buckets: Array<{ label: string }>;
  series: Array<{ key: string; calls: number[]; totalCalls: number }>;
  other: { calls: number[]; totalCalls: number } | null;
  totals: { calls: number };
}): UsageChart {
  return {
    from: answer.from,
    to: answer.to,
    days: answer.buckets.map((b) => b.label),
    series: [
      ...answer.series.map((s) => ({
        tool: s.key === '' ? '(no tool)' : s.key,
        calls: s.calls,
        total: s.totalCalls,
      })),
      ...(answer.other === null
        ? []
        : [{ tool: 'other tools', calls: answer.other.calls, total: answer.other.totalCalls }]),
    ],
    total: answer.totals.calls,
  };
}

/** Distinct on white and to each other, in the order tools are listed (the most calls first). */
const COLOURS = ['#3b5bdb', '#e8590c', '#2b8a3e', '#ae3ec9', '#c92a2a', '#5c677d'];

const WIDTH = 640;
const HEIGHT = 160;
const AXIS = 18;

/**
 * The chart as inline SVG (no script; the portal's CSP allows inline styles only): a stacked bar
 * per day, a legend with each tool's total, and the same figures in a table for screen readers.
 */
export function renderUsageChart(chart: UsageChart | null): string {
  if (chart === null) return '<p>Usage is not available right now.</p>';
  const range = `${chart.from.slice(0, 10)} to ${chart.to.slice(0, 10)}`;
  if (chart.total === 0) return `<p id="usage-total">No calls from ${escapeHtml(range)}.</p>`;
  const perDay = chart.days.map((_, i) => chart.series.reduce((sum, s) => sum + (s.calls[i] ?? 0), 0));
  const peak = Math.max(1, ...perDay);
  const slot = WIDTH / Math.max(1, chart.days.length);
  const bar = Math.max(1, slot * 0.7);
  const rects: string[] = [];
  chart.days.forEach((day, i) => {
    let y = HEIGHT - AXIS;
    chart.series.forEach((s, k) => {
      const calls = s.calls[i] ?? 0;
      if (calls === 0) return;
      const h = ((HEIGHT - AXIS - 4) * calls) / peak;
      y -= h;
      rects.push(
        `<rect x="${(i * slot + (slot - bar) / 2).toFixed(1)}" y="${y.toFixed(1)}" width="${bar.toFixed(1)}" height="${h.toFixed(1)}" fill="${COLOURS[k % COLOURS.length]}"><title>${escapeHtml(`${day}: ${calls} calls of ${s.tool}`)}</title></rect>`,
      );
    });
  });
  const first = chart.days[0] ?? '';
  const last = chart.days.at(-1) ?? '';
  const legend = chart.series
    .map(
      (s, k) =>
        `<li><span class="swatch" style="background:${COLOURS[k % COLOURS.length]}"></span>${escapeHtml(s.tool)}: ${s.total}</li>`,
    )
    .join('');
  const table = `<table class="sr"><caption>Calls per day by tool</caption><thead><tr><th scope="col">Day</th>${chart.series
    .map((s) => `<th scope="col">${escapeHtml(s.tool)}</th>`)
    .join('')}</tr></thead><tbody>${chart.days
    .map(
      (day, i) =>
        `<tr><th scope="row">${day}</th>${chart.series.map((s) => `<td>${s.calls[i] ?? 0}</td>`).join('')}</tr>`,
    )
    .join('')}</tbody></table>`;
  return `<p id="usage-total">${chart.total} calls from ${escapeHtml(range)}, by day and tool.</p>
<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" width="100%" role="img" aria-label="${escapeHtml(`Calls per day from ${range}: ${chart.total} in all, the most on one day ${peak}`)}">
${rects.join('')}
<line x1="0" y1="${HEIGHT - AXIS}" x2="${WIDTH}" y2="${HEIGHT - AXIS}" stroke="#888"/>
<text x="0" y="${HEIGHT - 4}" font-size="11" fill="#333">${escapeHtml(first)}</text>
<text x="${WIDTH}" y="${HEIGHT - 4}" font-size="11" fill="#333" text-anchor="end">${escapeHtml(last)}</text>
</svg>
<ul class="legend" id="usage-legend">${legend}</ul>${table}`;
}
