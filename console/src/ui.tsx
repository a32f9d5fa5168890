import { ANALYTICS_SLOT_MS } from '@mcp-meter/contracts/usage/analytics';
import type { UseQueryResult } from '@tanstack/react-query';
import { Link } from '@tanstack/react-router';
import type { ReactNode } from 'react';
import { ApiProblem } from './api';

/** A page: its heading (the document's title too), and its body. */
export function Page(props: { title: string; actions?: ReactNode; children: ReactNode }) {
  document.title = `${props.title} · MCP Meter console`;
  return (
    <section aria-labelledby="page-title">
      <div className="page-head">
        <h1 id="page-title">{props.title}</h1>
        {props.actions}
      </div>
      {props.children}
    </section>
  );
}

/** What a query shows while it loads, when it failed, and when it has nothing. */
export function Loading(props: { what: string }) {
  return (
    <p className="muted" role="status" aria-live="polite">
      Loading {props.what}…
    </p>
  );
}

export function Failed(props: { error: unknown; retry?: () => void }) {
  const message = props.error instanceof Error ? props.error.message : 'Something went wrong';
  return (
    <div className="problem" role="alert">
      <p>{message}</p>
      {props.retry && (
        <button type="button" onClick={props.retry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty(props: { children: ReactNode }) {
  return <div className="empty">{props.children}</div>;
}

/** A form's problem that names no field (a conflict, a refusal); field problems sit by their inputs. */
export function FormProblem(props: { error: unknown; fields?: readonly string[] }) {
  if (props.error === null || props.error === undefined) return null;
  if (props.error instanceof ApiProblem) {
    const named = props.fields ?? [];
    const unplaced = props.error.errors.filter(
      (e) => !named.some((f) => e.path === `/${f}` || e.path.startsWith(`/${f}/`)),
    );
    if (props.error.errors.length > 0 && unplaced.length === 0) return null;
    return (
      <div className="problem" role="alert">
        <p>
          {unplaced.length > 0
            ? unplaced.map((e) => `${e.path} ${e.message}`).join('; ')
            : props.error.message}
        </p>
      </div>
    );
  }
  return <Failed error={props.error} />;
}

/** A labelled input with the API's message for its field under it. */
export function Field(props: {
  label: string;
  name: string;
  error?: unknown;
  type?: string;
  value: string;
  onChange: (value: string) => void;
  required?: boolean;
  autoComplete?: string;
  hint?: string;
  inputMode?: 'numeric' | 'decimal' | 'email' | 'text';
}) {
  const id = `field-${props.name}`;
  const message = props.error instanceof ApiProblem ? props.error.field(props.name) : undefined;
  const describedBy = [props.hint ? `${id}-hint` : '', message ? `${id}-error` : '']
    .filter(Boolean)
    .join(' ');
  return (
    <div className="field">
      <label htmlFor={id}>{props.label}</label>
      <input
        id={id}
        name={props.name}
        type={props.type ?? 'text'}
        value={props.value}
        required={props.required}
        autoComplete={props.autoComplete}
        inputMode={props.inputMode}
        aria-invalid={message !== undefined}
        aria-describedby={describedBy || undefined}
        onChange={(event) => props.onChange(event.target.value)}
      />
      {props.hint && (
        <small id={`${id}-hint`} className="muted">
          {props.hint}
        </small>
      )}
      {message && (
        <small id={`${id}-error`} className="field-error">
          {message}
        </small>
      )}
    </div>
  );
}

export function Select<T extends string>(props: {
  label: string;
  name: string;
  value: T;
  options: readonly { value: T; label: string }[];
  onChange: (value: T) => void;
}) {
  const id = `field-${props.name}`;
  return (
    <div className="field">
      <label htmlFor={id}>{props.label}</label>
      <select
        id={id}
        name={props.name}
        value={props.value}
        onChange={(e) => props.onChange(e.target.value as T)}
      >
        {props.options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    </div>
  );
}

/** A checkbox with its label and any hint under it (inside a `choices` fieldset or div). */
export function Checkbox(props: {
  label: string;
  name: string;
  checked: boolean;
  hint?: string;
  onChange: (checked: boolean) => void;
}) {
  return (
    <label>
      <input
        type="checkbox"
        name={props.name}
        checked={props.checked}
        aria-describedby={props.hint === undefined ? undefined : `${props.name}-hint`}
        onChange={(e) => props.onChange(e.target.checked)}
      />
      {props.label}
      {props.hint !== undefined && (
        <small id={`${props.name}-hint`} className="muted">
          {props.hint}
        </small>
      )}
    </label>
  );
}

/** An analytics page's controls: a form that sends nothing, each choice applied as it changes. */
export function Choices(props: { children: ReactNode }) {
  return (
    <form className="row" aria-label="What to show" onSubmit={(e) => e.preventDefault()}>
      {props.children}
    </form>
  );
}

/**
 * Where an analytics page's range ends: the end of the current quarter hour, so the range is
 * whole 15-minute slots, which the usage rollups answer without reading raw records.
 */
export const rangeEnd = (): Date => new Date(Math.ceil(Date.now() / ANALYTICS_SLOT_MS) * ANALYTICS_SLOT_MS);

/** The range an analytics page shows, from its own list (value → label). */
export function RangeSelect<T extends string>(props: {
  value: T;
  ranges: Readonly<Record<T, string>>;
  onChange: (value: T) => void;
}) {
  return (
    <Select<T>
      label="Range"
      name="range"
      value={props.value}
      onChange={props.onChange}
      options={(Object.entries(props.ranges) as [T, string][]).map(([value, label]) => ({ value, label }))}
    />
  );
}

/** A secret shown once (a webhook signing secret): copy it now, it is not shown again. */
export function ShownOnce(props: { label: string; secret: string; onDone: () => void }) {
  return (
    <section className="shown-once" aria-label={props.label}>
      <p>
        <strong>{props.label}</strong>: copy it now; it is not shown again.
      </p>
      <code data-testid="secret">{props.secret}</code>
      <div className="row">
        <button type="button" onClick={() => void navigator.clipboard?.writeText(props.secret)}>
          Copy
        </button>
        <button type="button" onClick={props.onDone}>
          Done
        </button>
      </div>
    </section>
  );
}

export const dateTime = (iso: string) =>
  new Date(iso).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC' });

/** A query's three states, then its data: loading, failed (with a retry), empty, or `children`. */
export function Loaded<T>(props: {
  query: UseQueryResult<T>;
  what: string;
  isEmpty?: (data: T) => boolean;
  empty?: ReactNode;
  children: (data: T) => ReactNode;
}) {
  const { query } = props;
  if (query.isPending) return <Loading what={props.what} />;
  if (query.isError) return <Failed error={query.error} retry={() => void query.refetch()} />;
  if (props.isEmpty?.(query.data) === true) return <Empty>{props.empty}</Empty>;
  return <>{props.children(query.data)}</>;
}

/** A column of a Table: its heading and what each row shows in it. */
export interface Column<Row> {
  header: string;
  cell: (row: Row) => ReactNode;
  numeric?: boolean;
  /** Kept on one line (dates, months). */
  nowrap?: boolean;
  /** The header is for assistive technology only (an actions column). */
  hiddenHeader?: boolean;
}

/** A table with a caption for assistive technology and one header per column. */
export function Table<Row>(props: {
  caption: string;
  rows: readonly Row[];
  columns: readonly Column<Row>[];
  rowKey: (row: Row) => string;
}) {
  return (
    <table>
      <caption className="visually-hidden">{props.caption}</caption>
      <thead>
        <tr>
          {props.columns.map((column) => (
            <th key={column.header} scope="col" className={column.numeric ? 'n' : undefined}>
              {column.hiddenHeader ? <span className="visually-hidden">{column.header}</span> : column.header}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.rows.map((row) => (
          <tr key={props.rowKey(row)}>
            {props.columns.map((column) => (
              <td key={column.header} className={column.numeric ? 'n' : column.nowrap ? 'nw' : undefined}>
                {column.cell(row)}
              </td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The pages of one section (Billing: invoices, disputes, payouts, test clocks). */
export function SubNav(props: { label: string; links: readonly { to: string; label: string }[] }) {
  return (
    <nav aria-label={props.label} className="subnav">
      <ul>
        {props.links.map((link) => (
          <li key={link.to}>
            <Link to={link.to} activeOptions={{ exact: true }} activeProps={{ 'aria-current': 'page' }}>
              {link.label}
            </Link>
          </li>
        ))}
      </ul>
    </nav>
  );
}
