import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import { Table } from './ui';
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

const PALETTE = ['#1d4ed8', '#b45309', '#047857', '#7c3aed', '#be123c', '#0e7490', '#4d7c0f', '#a21caf'];

/** One line of a series chart: its name and a value per bucket. */
export interface Line {
  name: string;
  values: readonly number[];
}

/**
 * Several series over the same buckets as lines (uPlot, on a canvas), with a legend, and the
 * same numbers in a table for screen readers and for reading exactly.
 */
export function SeriesChart(props: {
  label: string;
  buckets: readonly { start: string; label: string }[];
  lines: readonly Line[];
}) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = box.current;
    if (element === null || props.buckets.length === 0) return;
    const xs = props.buckets.map((b) => Date.parse(b.start) / 1000);
    const plot = new uPlot(
      {
        width: Math.max(320, element.clientWidth),
        height: 260,
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [{ stroke: '#444' }, { stroke: '#444' }],
        series: [
          {},
          ...props.lines.map((line, i) => ({
            label: line.name,
            stroke: PALETTE[i % PALETTE.length],
            width: 2,
          })),
        ],
      },
      [xs, ...props.lines.map((line) => [...line.values])],
      element,
    );
    return () => plot.destroy();
  }, [props.buckets, props.lines]);
  const totals = props.lines.map((line) => line.values.reduce((sum, v) => sum + v, 0));
  return (
    <figure className="chart">
      <div
        ref={box}
        role="img"
        aria-label={`${props.label}: ${props.lines.map((l, i) => `${l.name || 'none'} ${totals[i]}`).join(', ')}`}
      />
      <figcaption>
        {props.label} in {props.buckets.length} buckets:{' '}
        {props.lines.map((l, i) => (
          <span key={l.name} data-testid={`line-total-${l.name || 'none'}`}>
            {i > 0 ? ', ' : ''}
            {l.name || 'none'} {totals[i]}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}

/**
 * A table's rows as a CSV file the browser downloads (RFC 4180 quoting). A text that a
 * spreadsheet would run as a formula (=, +, -, @ first) is prefixed with a quote mark: tool names
 * and references come from others.
 */
export function downloadCsv(
  name: string,
  header: readonly string[],
  rows: readonly (readonly (string | number)[])[],
) {
  const cell = (value: string | number) => {
    const text = typeof value === 'string' && /^[=+\-@\t\r]/.test(value) ? `'${value}` : String(value);
    return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  const text = [header, ...rows].map((row) => row.map(cell).join(',')).join('\r\n');
  const url = URL.createObjectURL(new Blob([`${text}\r\n`], { type: 'text/csv' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.click();
  URL.revokeObjectURL(url);
}

type Cells = readonly (string | number)[];

/**
 * A table of rows as the page shows them, with a button that downloads it as CSV: the same rows,
 * or `csv` when the file should hold them otherwise (plain decimals rather than money).
 */
export function ExportableTable(props: {
  caption: string;
  header: readonly string[];
  rows: readonly Cells[];
  /** Columns before this one are text; the rest are numbers, right-aligned. */
  textColumns: number;
  file: string;
  exportLabel: string;
  csv?: { header: readonly string[]; rows: readonly Cells[] };
}) {
  const csv = props.csv ?? { header: props.header, rows: props.rows };
  return (
    <>
      <Table<Cells>
        caption={props.caption}
        rows={props.rows}
        rowKey={(row) => row.slice(0, props.textColumns).join('/')}
        columns={props.header.map((header, i) => ({
          header,
          numeric: i >= props.textColumns,
          nowrap: i === 0,
          cell: (row) => row[i],
        }))}
      />
      <button type="button" onClick={() => downloadCsv(props.file, csv.header, csv.rows)}>
        {props.exportLabel}
      </button>
    </>
  );
}
