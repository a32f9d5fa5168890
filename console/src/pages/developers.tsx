import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { mayIntegrate, useSession } from '../session';
import { dateTime, Empty, Failed, Field, FormProblem, Loading, Page, ShownOnce } from '../ui';

/** Webhook endpoints: add one (its signing secret shown once), test it, read its deliveries. */
export function Developers() {
  const session = useSession();
  const client = useQueryClient();
  const endpoints = useQuery({
    queryKey: ['webhook-endpoints'],
    queryFn: () => unwrap(api.GET('/v1/webhook_endpoints')),
  });
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [secret, setSecret] = useState<string | undefined>(undefined);
  const [open, setOpen] = useState<string | undefined>(undefined);
  const create = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/v1/webhook_endpoints', { body: { url, ...(description ? { description } : {}) } })),
    onSuccess: (endpoint) => {
      setUrl('');
      setDescription('');
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
  const canChange = session.data !== undefined && mayIntegrate(session.data.role);
  return (
    <Page title="Developers">
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
                  <button type="button" onClick={() => test.mutate(endpoint.id)} disabled={test.isPending}>
                    Send a test event to {endpoint.url}
                  </button>
                )}
              </div>
              {open === endpoint.id && <Attempts endpointId={endpoint.id} />}
            </li>
          ))}
        </ul>
      )}
      <FormProblem error={test.error} />
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
          <FormProblem error={create.error} fields={['url', 'description']} />
          <button type="submit" className="primary" disabled={create.isPending}>
            Add endpoint
          </button>
        </form>
      )}
    </Page>
  );
}

/** An endpoint's delivery log: each attempt's event, status, latency and answer. */
function Attempts(props: { endpointId: string }) {
  const attempts = useQuery({
    queryKey: ['webhook-attempts', props.endpointId],
    queryFn: () =>
      unwrap(
        api.GET('/v1/webhook_attempts', { params: { query: { endpointId: props.endpointId, limit: 20 } } }),
      ),
  });
  if (attempts.isPending) return <Loading what="deliveries" />;
  if (attempts.error) return <Failed error={attempts.error} retry={() => void attempts.refetch()} />;
  if (attempts.data.data.length === 0) return <p className="muted">No deliveries yet.</p>;
  return (
    <table>
      <caption className="visually-hidden">Delivery attempts</caption>
      <thead>
        <tr>
          <th scope="col">When (UTC)</th>
          <th scope="col">Event</th>
          <th scope="col">Attempt</th>
          <th scope="col">Answer</th>
          <th scope="col">Latency</th>
        </tr>
      </thead>
      <tbody>
        {attempts.data.data.map((a) => (
          <tr key={a.id}>
            <td>{dateTime(a.createdAt)}</td>
            <td>
              <code>{a.eventType}</code>
            </td>
            <td>{a.attempt}</td>
            <td>{a.succeeded ? `${a.statusCode} ok` : (a.error ?? `${a.statusCode ?? 'no answer'}`)}</td>
            <td>{a.latencyMs === null ? '—' : `${a.latencyMs} ms`}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
