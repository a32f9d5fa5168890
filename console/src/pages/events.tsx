import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { ApiProblem, api, unwrap } from '../api';
import { dateTime, Loaded, Page, Select, SubNav, Table } from '../ui';

export function DevelopersNav() {
  return (
    <SubNav
      label="Developers"
      links={[
        { to: '/developers', label: 'API keys and webhooks' },
        { to: '/developers/events', label: 'Events' },
      ]}
    />
  );
}

type Event = Awaited<ReturnType<typeof loadEvents>>['data'][number];

const loadEvents = (type: string, cursor: string | undefined, customerRef?: string) =>
  unwrap(
    api.GET('/v1/events', {
      params: {
        query: {
          limit: 25,
          ...(type ? { type } : {}),
          ...(cursor ? { cursor } : {}),
          ...(customerRef ? { customerRef } : {}),
        },
      },
    }),
  );

/** Events newest first, each opening to the envelope webhooks deliver. */
export function EventTable(props: { events: readonly Event[]; caption: string }) {
  return (
    <Table
      caption={props.caption}
      rows={props.events}
      rowKey={(e) => e.id}
      columns={[
        { header: 'When (UTC)', cell: (e) => dateTime(new Date(e.created * 1000).toISOString()) },
        { header: 'Type', cell: (e) => <code>{e.type}</code> },
        {
          header: 'Event',
          cell: (e) => (
            <details>
              <summary>{e.id}</summary>
              <pre>
                <code>{JSON.stringify(e, null, 2)}</code>
              </pre>
            </details>
          ),
        },
      ]}
    />
  );
}

/** A customer's events, a page at a time (the customer page's activity view). */
export function CustomerEvents(props: { customerRef: string }) {
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const events = useQuery({
    queryKey: ['events', 'customer', props.customerRef, cursor],
    queryFn: () => loadEvents('', cursor, props.customerRef),
  });
  return (
    <Loaded
      query={events}
      what="events"
      isEmpty={(e) => e.data.length === 0 && cursor === undefined}
      empty={<p>No events about this customer yet.</p>}
    >
      {(e) => (
        <>
          <EventTable events={e.data} caption="The customer's events, newest first" />
          <Pager cursors={cursors} next={e.nextCursor} onChange={setCursors} />
        </>
      )}
    </Loaded>
  );
}

function Pager(props: { cursors: string[]; next: string | null; onChange: (cursors: string[]) => void }) {
  return (
    <div className="row">
      {props.cursors.length > 0 && (
        <button type="button" onClick={() => props.onChange(props.cursors.slice(0, -1))}>
          Newer events
        </button>
      )}
      {props.next !== null && (
        <button type="button" onClick={() => props.onChange([...props.cursors, props.next as string])}>
          Older events
        </button>
      )}
    </div>
  );
}

/**
 * The event catalog (every type webhooks carry, by group) and the events recorded, filtered by
 * type: two API calls.
 */
export function Events() {
  const [type, setType] = useState('');
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const catalog = useQuery({
    queryKey: ['event-types'],
    queryFn: () => unwrap(api.GET('/v1/sdk/webhooks/event-types')),
    staleTime: Number.POSITIVE_INFINITY,
  });
  const events = useQuery({ queryKey: ['events', type, cursor], queryFn: () => loadEvents(type, cursor) });
  const groups = new Map<string, { type: string; description: string }[]>();
  for (const t of catalog.data?.data ?? []) groups.set(t.group, [...(groups.get(t.group) ?? []), t]);
  return (
    <Page title="Events">
      <DevelopersNav />
      <h2>Recent events</h2>
      <Select
        label="Event type"
        name="type"
        value={type}
        onChange={(next) => {
          setType(next);
          setCursors([]);
        }}
        options={[
          { value: '', label: 'All types' },
          ...(catalog.data?.data ?? []).map((t) => ({ value: t.type, label: t.type })),
        ]}
      />
      <Loaded
        query={events}
        what="events"
        isEmpty={(e) => e.data.length === 0 && cursor === undefined}
        empty={<p>No events{type ? ` of type ${type}` : ''} yet.</p>}
      >
        {(e) => (
          <>
            <EventTable events={e.data} caption="Events, newest first" />
            <Pager cursors={cursors} next={e.nextCursor} onChange={setCursors} />
          </>
        )}
      </Loaded>
      <h2>Event types</h2>
      <p className="muted">
        What webhook endpoints can subscribe to; each is delivered signed, in the envelope shown above.
      </p>
      <Loaded query={catalog} what="event types">
        {() =>
          [...groups].map(([group, types]) => (
            <section key={group} aria-labelledby={`group-${group}`}>
              <h3 id={`group-${group}`}>{group}</h3>
              <Table
                caption={`${group} events`}
                rows={types}
                rowKey={(t) => t.type}
                columns={[
                  { header: 'Type', cell: (t) => <code>{t.type}</code> },
                  { header: 'When', cell: (t) => t.description },
                ]}
              />
            </section>
          ))
        }
      </Loaded>
    </Page>
  );
}

/**
 * Which events an endpoint takes: all (none ticked), or the types ticked, by group. The catalog
 * is read when the choice is opened.
 */
export function EventChoice(props: { value: string[]; onChange: (next: string[]) => void; error: unknown }) {
  const [open, setOpen] = useState(false);
  const catalog = useQuery({
    enabled: open,
    queryKey: ['event-types'],
    queryFn: () => unwrap(api.GET('/v1/sdk/webhooks/event-types')),
    staleTime: Number.POSITIVE_INFINITY,
  });
  const groups = new Map<string, string[]>();
  for (const t of catalog.data?.data ?? []) groups.set(t.group, [...(groups.get(t.group) ?? []), t.type]);
  const message = props.error instanceof ApiProblem ? props.error.field('enabledEvents') : undefined;
  const toggle = (type: string, on: boolean) =>
    props.onChange(on ? [...props.value, type] : props.value.filter((t) => t !== type));
  return (
    <details onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>
        Events: {props.value.length === 0 ? 'all' : `${props.value.length} chosen`} (choose some)
      </summary>
      {message && <p className="field-error">{message}</p>}
      <Loaded query={catalog} what="event types">
        {() =>
          [...groups].map(([group, types]) => (
            <fieldset key={group} className="checks">
              <legend>{group}</legend>
              {types.map((type) => (
                <label key={type}>
                  <input
                    type="checkbox"
                    checked={props.value.includes(type)}
                    onChange={(e) => toggle(type, e.target.checked)}
                  />
                  {type}
                </label>
              ))}
            </fieldset>
          ))
        }
      </Loaded>
    </details>
  );
}
