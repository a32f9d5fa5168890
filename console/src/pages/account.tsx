import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useNavigate } from '@tanstack/react-router';
import { useState } from 'react';
import { api, setCsrfToken, unwrap } from '../api';
import { useSession } from '../session';
import { Field, FormProblem, Page } from '../ui';

/**
 * The signed-in person's own account: change the password (every other session ends) and sign
 * out everywhere (every session ends, this one included).
 */
export function Account() {
  const session = useSession();
  const client = useQueryClient();
  const navigate = useNavigate();
  const [currentPassword, setCurrent] = useState('');
  const [newPassword, setNew] = useState('');
  const change = useMutation({
    mutationFn: () => unwrap(api.PUT('/v1/console/password', { body: { currentPassword, newPassword } })),
    onSuccess: () => {
      setCurrent('');
      setNew('');
    },
  });
  const everywhere = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/console/session/sign-out-everywhere')),
    onSuccess: () => {
      setCsrfToken(undefined);
      client.clear();
      void navigate({ to: '/sign-in' });
    },
  });
  return (
    <Page title="Your account">
      {session.data && (
        <p>
          {session.data.user.email} · {session.data.role} of {session.data.provider.displayName}
        </p>
      )}
      <form
        className="card"
        aria-labelledby="password-title"
        noValidate
        onSubmit={(event) => {
          event.preventDefault();
          change.mutate();
        }}
      >
        <h2 id="password-title">Change your password</h2>
        <Field
          label="Current password"
          name="currentPassword"
          type="password"
          autoComplete="current-password"
          value={currentPassword}
          onChange={setCurrent}
          error={change.error}
        />
        <Field
          label="New password"
          name="newPassword"
          type="password"
          autoComplete="new-password"
          value={newPassword}
          onChange={setNew}
          error={change.error}
          hint="At least 8 characters; your other sessions end"
        />
        <FormProblem error={change.error} fields={['currentPassword', 'newPassword']} />
        {change.isSuccess && <p role="status">Password changed; your other sessions have ended.</p>}
        <button type="submit" className="primary" disabled={change.isPending}>
          Change password
        </button>
      </form>
      <section className="card" aria-labelledby="everywhere-title">
        <h2 id="everywhere-title">Sessions</h2>
        <p className="muted">Ends every console session of your account, on every device, this one too.</p>
        <FormProblem error={everywhere.error} />
        <button type="button" onClick={() => everywhere.mutate()} disabled={everywhere.isPending}>
          Sign out everywhere
        </button>
      </section>
    </Page>
  );
}
