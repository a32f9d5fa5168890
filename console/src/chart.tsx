import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/**
 * Daily counts as bars (uPlot draws on a canvas), with the same numbers in a table for screen
 * readers and for anyone who wants to read them exactly.
 */
export function DailyChart(props: { label: string; days: readonly { date: string; value: number }[] }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = box.current;
    if (element === null) return;
    const xs = props.days.map((d) => Date.parse(`${d.date}T00:00:00Z`) / 1000);
    const ys = props.days.map((d) => d.value);
    const plot = new uPlot(
      {
        width: Math.max(320, element.clientWidth),
        height: 220,
        legend: { show: false },
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [{ stroke: '#444' }, { stroke: '#444' }],
        series: [
          {},
          {
            label: props.label,
            stroke: '#1d4ed8',
            fill: 'rgba(29, 78, 216, 0.25)',
            paths: uPlot.paths.bars?.({ size: [0.7, 40] }),
          },
        ],
      },
      [xs, ys],
      element,
    );
    return () => plot.destroy();
  }, [props.days, props.label]);
  const total = props.days.reduce((sum, d) => sum + d.value, 0);
  return (
    <figure className="chart">
      <div
        ref={box}
        role="img"
        aria-label={`${props.label} per day: ${total} in ${props.days.length} days`}
      />
      <figcaption>
        {props.label}: <strong data-testid="chart-total">{total}</strong> in the last {props.days.length} days
      </figcaption>
      <details>
        <summary>The numbers</summary>
        <table>
          <caption className="visually-hidden">{props.label} per day</caption>
          <thead>
            <tr>
              <th scope="col">Day (UTC)</th>
              <th scope="col">{props.label}</th>
            </tr>
          </thead>
          <tbody>
            {props.days.map((d) => (
              <tr key={d.date}>
                <td>{d.date}</td>
                <td>{d.value}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}
