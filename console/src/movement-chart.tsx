import { money } from './api';

/** One month of MRR movements, in minor units. */
export interface MovementMonth {
  month: string;
  end: number;
  new: number;
  expansion: number;
  reactivation: number;
  contraction: number;
  churn: number;
}

const GAINS = [
  ['new', 'New', '#047857'],
  ['expansion', 'Expansion', '#1d4ed8'],
  ['reactivation', 'Reactivation', '#7c3aed'],
] as const;
const LOSSES = [
  ['contraction', 'Contraction', '#b45309'],
  ['churn', 'Churn', '#be123c'],
] as const;

/**
 * MRR movements per month as bars (gains stacked above the axis, losses below) with MRR at each
 * month's end as a line: drawn in SVG, so it needs no library, and labelled as one image whose
 * numbers the page's table gives exactly.
 */
export function MovementChart(props: { months: readonly MovementMonth[]; currency: string }) {
  const width = 720;
  const height = 280;
  const pad = { left: 8, right: 8, top: 16, bottom: 28 };
  const gains = props.months.map((m) => GAINS.reduce((s, [k]) => s + m[k], 0));
  const losses = props.months.map((m) => LOSSES.reduce((s, [k]) => s + m[k], 0));
  const top = Math.max(1, ...gains, ...props.months.map((m) => m.end));
  const bottom = Math.max(0, ...losses);
  const plot = height - pad.top - pad.bottom;
  const scale = plot / (top + bottom);
  const zero = pad.top + top * scale;
  const slot = (width - pad.left - pad.right) / Math.max(1, props.months.length);
  const bar = Math.min(48, slot * 0.6);
  const x = (i: number) => pad.left + slot * i + slot / 2;
  const summary = props.months.map((m) => `${m.month}: MRR ${money(m.end, props.currency)}`).join('; ');
  return (
    <figure className="chart">
      <svg
        viewBox={`0 0 ${width} ${height}`}
        width="100%"
        role="img"
        aria-label={`MRR movements per month. ${summary}`}
        data-testid="mrr-chart"
      >
        <line x1={pad.left} x2={width - pad.right} y1={zero} y2={zero} stroke="#444" />
        {props.months.map((m, i) => {
          let up = zero;
          let down = zero;
          return (
            <g key={m.month} data-month={m.month}>
              {GAINS.map(([key, , colour]) => {
                const h = m[key] * scale;
                up -= h;
                return h > 0 ? (
                  <rect key={key} x={x(i) - bar / 2} y={up} width={bar} height={h} fill={colour} />
                ) : null;
              })}
              {LOSSES.map(([key, , colour]) => {
                const h = m[key] * scale;
                const y = down;
                down += h;
                return h > 0 ? (
                  <rect key={key} x={x(i) - bar / 2} y={y} width={bar} height={h} fill={colour} />
                ) : null;
              })}
              <text x={x(i)} y={height - 8} textAnchor="middle" fontSize="12" fill="#333">
                {m.month}
              </text>
            </g>
          );
        })}
        <polyline
          fill="none"
          stroke="#111"
          strokeWidth="2"
          points={props.months.map((m, i) => `${x(i)},${zero - m.end * scale}`).join(' ')}
        />
        {props.months.map((m, i) => (
          <circle key={m.month} cx={x(i)} cy={zero - m.end * scale} r="3" fill="#111" />
        ))}
      </svg>
      <figcaption>
        <span className="legend">
          {[...GAINS, ...LOSSES].map(([key, label, colour]) => (
            <span key={key}>
              <span className="swatch" style={{ background: colour }} aria-hidden="true" /> {label}
            </span>
          ))}
          <span>
            <span className="swatch line" aria-hidden="true" /> MRR at month end
          </span>
        </span>
      </figcaption>
    </figure>
  );
}
