import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { mayIntegrate, useSession } from '../session';
import { dateTime, Empty, Failed, Field, FormProblem, Loading, Page, ShownOnce } from '../ui';
import { ApiKeys } from './api-keys';
import { DevelopersNav, EventChoice } from './events';

/** API keys, and webhook endpoints: add one (its signing secret shown once), test it, read its deliveries. */
export function Developers() {
  const session = useSession();
  const client = useQueryClient();
  const endpoints = useQuery({
    queryKey: ['webhook-endpoints'],
    queryFn: () => unwrap(api.GET('/v1/webhook_endpoints')),
  });
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<string[]>([]);
  const [secret, setSecret] = useState<string | undefined>(undefined);
  const [open, setOpen] = useState<string | undefined>(undefined);
  const create = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/webhook_endpoints', {
          body: {
            url,
            ...(description ? { description } : {}),
            ...(events.length > 0 ? { enabledEvents: events } : {}),
          },
        }),
      ),
    onSuccess: (endpoint) => {
      setUrl('');
      setDescription('');
      setEvents([]);
      setSecret(endpoint.secret);
      void client.invalidateQueries({ queryKey: ['webhook-endpoints'] });
    },
  });
  const test = useMutation({
    mutationFn: (endpointId: string) =>
      unwrap(api.POST('/v1/ui/webhooks/{endpointId}/test', { params: { path: { endpointId } } })),
    onSettled: (_data, _error, endpointId) =>
      void client.invalidateQueries({ queryKey: ['webhook-attempts', endpointId] }),
  });
  const rotate = useMutation({
    mutationFn: (id: string) =>
      unwrap(
        api.POST('/v1/webhook_endpoints/{id}/rotate-secret', {
          params: { path: { id } },
          body: { overlapSeconds: 86_400 },
        }),
      ),
    onSuccess: (rotated) => setSecret(rotated.secret),
  });
  const toggle = useMutation({
    mutationFn: (input: { id: string; enable: boolean }) =>
      unwrap(
        input.enable
          ? api.POST('/v1/webhook_endpoints/{id}/enable', { params: { path: { id: input.id } } })
          : api.POST('/v1/webhook_endpoints/{id}/disable', { params: { path: { id: input.id } } }),
      ),
    onSettled: () => void client.invalidateQueries({ queryKey: ['webhook-endpoints'] }),
  });
  const canChange = session.data !== undefined && mayIntegrate(session.data.role);
  return (
    <Page title="Developers">
      <DevelopersNav />
      <ApiKeys />
      <h2>Webhook endpoints</h2>
      {secret && (
        <ShownOnce
          label="Signing secret of the new endpoint"
          secret={secret}
          onDone={() => setSecret(undefined)}
        />
      )}
      {endpoints.isPending ? (
        <Loading what="webhook endpoints" />
      ) : endpoints.error ? (
        <Failed error={endpoints.error} retry={() => void endpoints.refetch()} />
      ) : endpoints.data.data.length === 0 ? (
        <Empty>
          <p>No webhook endpoints: add one to hear of purchases, payments and refunds as they happen.</p>
        </Empty>
      ) : (
        <ul className="cards">
          {endpoints.data.data.map((endpoint) => (
            <li key={endpoint.id} className="card">
              <p>
                <strong>{endpoint.url}</strong> · {endpoint.status}
                {endpoint.description ? ` · ${endpoint.description}` : ''}
              </p>
              <p className="muted">
                <code>{endpoint.id}</code> · events:{' '}
                {endpoint.enabledEvents.length === 0 ? 'all' : endpoint.enabledEvents.join(', ')}
              </p>
              <div className="row">
                <button
                  type="button"
                  aria-expanded={open === endpoint.id}
                  onClick={() => setOpen(open === endpoint.id ? undefined : endpoint.id)}
                >
                  Deliveries to {endpoint.url}
                </button>
                {canChange && (
                  <>
                    <button type="button" onClick={() => test.mutate(endpoint.id)} disabled={test.isPending}>
                      Send a test event to {endpoint.url}
                    </button>
                    <button
                      type="button"
                      onClick={() => rotate.mutate(endpoint.id)}
                      disabled={rotate.isPending}
                    >
                      Rotate the secret of {endpoint.url}
                    </button>
                    <button
                      type="button"
                      onClick={() =>
                        toggle.mutate({ id: endpoint.id, enable: endpoint.status !== 'enabled' })
                      }
                      disabled={toggle.isPending}
                    >
                      {endpoint.status === 'enabled' ? 'Disable' : 'Enable'} {endpoint.url}
                    </button>
                  </>
                )}
              </div>
              {endpoint.disabledReason && <p className="muted">Disabled: {endpoint.disabledReason}</p>}
              {open === endpoint.id && (
                <Attempts endpointId={endpoint.id} url={endpoint.url} canReplay={canChange} />
              )}
            </li>
          ))}
        </ul>
      )}
      <FormProblem error={test.error ?? rotate.error ?? toggle.error} />
      {canChange && (
        <form
          className="card"
          aria-labelledby="new-endpoint"
          onSubmit={(event) => {
            event.preventDefault();
            create.mutate();
          }}
          noValidate
        >
          <h2 id="new-endpoint">New webhook endpoint</h2>
          <Field
            label="URL"
            name="url"
            type="url"
            value={url}
            onChange={setUrl}
            error={create.error}
            hint="https://… where your server receives events"
            required
          />
          <Field
            label="Description"
            name="description"
            value={description}
            onChange={setDescription}
            error={create.error}
          />
          <EventChoice value={events} onChange={setEvents} error={create.error} />
          <FormProblem error={create.error} fields={['url', 'description', 'enabledEvents']} />
          <button type="submit" className="primary" disabled={create.isPending}>
            Add endpoint
          </button>
        </form>
      )}
    </Page>
  );
}

interface Attempt {
  id: string;
  eventId: string;
  eventType: string;
  statusCode: number | null;
  responseExcerpt: string | null;
  error: string | null;
}

/**
 * One attempt opened: the request (POST to the endpoint with its delivery and event ids, and the
 * signed body, the event's envelope, read when opened) and what the endpoint answered.
 */
function AttemptDetail(props: { attempt: Attempt; url: string }) {
  const a = props.attempt;
  const [open, setOpen] = useState(false);
  const event = useQuery({
    enabled: open,
    queryKey: ['event', a.eventId],
    queryFn: () => unwrap(api.GET('/v1/events/{id}', { params: { path: { id: a.eventId } } })),
    staleTime: Number.POSITIVE_INFINITY,
  });
  return (
    <details onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>
        <code>{a.eventType}</code>
      </summary>
      <p>
        Request: <code>POST {props.url}</code> · SV-Delivery <code>{a.id}</code> · event{' '}
        <code>{a.eventId}</code>
      </p>
      {open &&
        (event.isPending ? (
          <Loading what="the event" />
        ) : event.error ? (
          <Failed error={event.error} />
        ) : (
          <pre>
            <code>{JSON.stringify(event.data, null, 2)}</code>
          </pre>
        ))}
      <p>
        Response: {a.statusCode === null ? (a.error ?? 'no answer') : `HTTP ${a.statusCode}`}
        {a.responseExcerpt ? ':' : ''}
      </p>
      {a.responseExcerpt && (
        <pre>
          <code>{a.responseExcerpt}</code>
        </pre>
      )}
    </details>
  );
}

/** An endpoint's delivery log: each attempt's event, status, latency and answer; replay an event. */
function Attempts(props: { endpointId: string; url: string; canReplay: boolean }) {
  const client = useQueryClient();
  const replay = useMutation({
    mutationFn: (eventId: string) =>
      unwrap(
        api.POST('/v1/webhook_endpoints/{id}/redeliver', {
          params: { path: { id: props.endpointId } },
          body: { eventId },
        }),
      ),
    onSettled: () => {
      // The worker sends it within moments: read the log again shortly.
      setTimeout(
        () => void client.invalidateQueries({ queryKey: ['webhook-attempts', props.endpointId] }),
        1500,
      );
    },
  });
  const attempts = useQuery({
    queryKey: ['webhook-attempts', props.endpointId],
    queryFn: () =>
      unwrap(
        api.GET('/v1/webhook_attempts', { params: { query: { endpointId: props.endpointId, limit: 100 } } }),
      ),
    // A log is read fresh each time it is opened.
    staleTime: 0,
    refetchOnMount: 'always',
  });
  if (attempts.isPending) return <Loading what="deliveries" />;
  if (attempts.error) return <Failed error={attempts.error} retry={() => void attempts.refetch()} />;
  if (attempts.data.data.length === 0) return <p className="muted">No deliveries yet.</p>;
  return (
    <>
      {replay.isSuccess && <p role="status">Queued again: the log shows its delivery in a moment.</p>}
      <FormProblem error={replay.error} />
      <table>
        <caption className="visually-hidden">Delivery attempts</caption>
        <thead>
          <tr>
            <th scope="col">When (UTC)</th>
            <th scope="col">Event</th>
            <th scope="col">Attempt</th>
            <th scope="col">Answer</th>
            <th scope="col">Latency</th>
            {props.canReplay && (
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>
          {attempts.data.data.map((a) => (
            <tr key={a.id}>
              <td>{dateTime(a.createdAt)}</td>
              <td>
                <AttemptDetail attempt={a} url={props.url} />
              </td>
              <td>{a.attempt}</td>
              <td>{a.succeeded ? `${a.statusCode} ok` : (a.error ?? `${a.statusCode ?? 'no answer'}`)}</td>
              <td>{a.latencyMs === null ? '—' : `${a.latencyMs} ms`}</td>
              {props.canReplay && (
                <td>
                  <button type="button" onClick={() => replay.mutate(a.eventId)} disabled={replay.isPending}>
                    Replay {a.eventType} ({a.attempt})
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
