import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { mayIntegrate, useSession } from '../session';
import { dateTime, Empty, Failed, Field, FormProblem, Loading, Select, ShownOnce } from '../ui';

const OVERLAPS = [
  { value: '0', label: 'Stop the old secret now' },
  { value: '3600', label: 'Keep the old secret for 1 hour' },
  { value: '86400', label: 'Keep the old secret for 24 hours' },
  { value: '604800', label: 'Keep the old secret for 7 days' },
] as const;
type Overlap = (typeof OVERLAPS)[number]['value'];

/** The environment's secret keys: create (secret shown once), roll with an overlap, revoke. */
export function ApiKeys() {
  const session = useSession();
  const client = useQueryClient();
  const keys = useQuery({ queryKey: ['api-keys'], queryFn: () => unwrap(api.GET('/v1/ui/api-keys')) });
  const refresh = () => void client.invalidateQueries({ queryKey: ['api-keys'] });
  const [name, setName] = useState('');
  const [overlap, setOverlap] = useState<Overlap>('3600');
  const [secret, setSecret] = useState<{ label: string; value: string } | undefined>(undefined);
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/ui/api-keys', { body: name ? { name } : {} })),
    onSuccess: (key) => {
      setName('');
      setSecret({ label: `Secret of the new key${key.name ? ` ${key.name}` : ''}`, value: key.secret });
      refresh();
    },
  });
  const roll = useMutation({
    mutationFn: (id: string) =>
      unwrap(
        api.POST('/v1/ui/api-keys/{id}/roll', {
          params: { path: { id } },
          body: { overlapSeconds: Number(overlap) },
        }),
      ),
    onSuccess: (key) => {
      setSecret({ label: `New secret of ${key.name ?? key.hint}`, value: key.secret });
      refresh();
    },
  });
  const revoke = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/v1/ui/api-keys/{id}', { params: { path: { id } } })),
    onSettled: refresh,
  });
  const canChange = session.data !== undefined && mayIntegrate(session.data.role);
  return (
    <>
      <h2>API keys</h2>
      {secret && <ShownOnce label={secret.label} secret={secret.value} onDone={() => setSecret(undefined)} />}
      {keys.isPending ? (
        <Loading what="API keys" />
      ) : keys.error ? (
        <Failed error={keys.error} retry={() => void keys.refetch()} />
      ) : keys.data.data.length === 0 ? (
        <Empty>
          <p>No secret key opens the API in this environment.</p>
        </Empty>
      ) : (
        <table>
          <caption className="visually-hidden">Secret keys</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Key</th>
              <th scope="col">Created (UTC)</th>
              <th scope="col">Stops working</th>
              {canChange && (
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {keys.data.data.map((key) => {
              const label = key.name ?? key.hint;
              return (
                <tr key={key.id}>
                  <td>{key.name ?? '—'}</td>
                  <td>
                    <code>{key.hint}</code>
                  </td>
                  <td>
                    {dateTime(key.createdAt)}
                    {key.createdBy ? ` by ${key.createdBy}` : ''}
                  </td>
                  <td>{key.expiresAt ? dateTime(key.expiresAt) : 'never'}</td>
                  {canChange && (
                    <td>
                      <div className="row">
                        {key.expiresAt === null && (
                          <button type="button" onClick={() => roll.mutate(key.id)} disabled={roll.isPending}>
                            Roll {label}
                          </button>
                        )}
                        <button
                          type="button"
                          onClick={() => revoke.mutate(key.id)}
                          disabled={revoke.isPending}
                        >
                          Revoke {label}
                        </button>
                      </div>
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {canChange && keys.data !== undefined && keys.data.data.length > 0 && (
        <Select<Overlap>
          label="When rolling a key"
          name="overlap"
          value={overlap}
          onChange={setOverlap}
          options={OVERLAPS}
        />
      )}
      <FormProblem error={roll.error ?? revoke.error} />
      {canChange && (
        <form
          className="card"
          aria-labelledby="new-key"
          onSubmit={(event) => {
            event.preventDefault();
            create.mutate();
          }}
          noValidate
        >
          <h2 id="new-key">New secret key</h2>
          <Field
            label="Key name"
            name="name"
            value={name}
            onChange={setName}
            error={create.error}
            hint="What the key is for"
          />
          <FormProblem error={create.error} fields={['name']} />
          <button type="submit" className="primary" disabled={create.isPending}>
            Create key
          </button>
        </form>
      )}
    </>
  );
}
