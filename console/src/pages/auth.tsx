import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useNavigate } from '@tanstack/react-router';
import { type FormEvent, useState } from 'react';
import { ApiProblem, api, setCsrfToken, unwrap } from '../api';
import { Failed, Field, FormProblem, Loading, Select } from '../ui';

type SessionAnswer = Awaited<ReturnType<typeof signInCall>>;
const signInCall = (body: { email: string; password: string; providerId?: string }) =>
  unwrap(api.POST('/v1/console/sessions', { body }));

/** Keeps a new session and opens the console. */
function useSignedIn() {
  const client = useQueryClient();
  const navigate = useNavigate();
  return (session: SessionAnswer) => {
    setCsrfToken(session.csrfToken);
    client.clear();
    client.setQueryData(['session'], session);
    void navigate({ to: '/' });
  };
}

function Door(props: { title: string; children: React.ReactNode }) {
  document.title = `${props.title} · MCP Meter console`;
  return (
    <main className="door" id="main">
      <h1>{props.title}</h1>
      {props.children}
    </main>
  );
}

export function SignIn() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [providerId, setProviderId] = useState('');
  const signedIn = useSignedIn();
  const signIn = useMutation({
    mutationFn: () => signInCall({ email, password, ...(providerId ? { providerId } : {}) }),
    onSuccess: signedIn,
  });
  const choices =
    signIn.error instanceof ApiProblem && signIn.error.code === 'provider_required'
      ? ((signIn.error.body.providers as { id: string; displayName: string }[] | undefined) ?? [])
      : [];
  const submit = (event: FormEvent) => {
    event.preventDefault();
    signIn.mutate();
  };
  return (
    <Door title="Sign in">
      <form onSubmit={submit} noValidate>
        <Field
          label="Email"
          name="email"
          type="email"
          autoComplete="email"
          value={email}
          onChange={setEmail}
          error={signIn.error}
          required
        />
        <Field
          label="Password"
          name="password"
          type="password"
          autoComplete="current-password"
          value={password}
          onChange={setPassword}
          error={signIn.error}
          required
        />
        {choices.length > 0 && (
          <Select
            label="Team"
            name="providerId"
            value={providerId}
            options={[
              { value: '', label: 'Choose a team' },
              ...choices.map((p) => ({ value: p.id, label: p.displayName })),
            ]}
            onChange={setProviderId}
          />
        )}
        <FormProblem
          error={choices.length > 0 && providerId ? null : signIn.error}
          fields={['email', 'password']}
        />
        <button type="submit" className="primary" disabled={signIn.isPending}>
          Sign in
        </button>
      </form>
      <p>
        New here? <Link to="/sign-up">Create an account</Link>
      </p>
    </Door>
  );
}

export function SignUp() {
  const [businessName, setBusinessName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const signedIn = useSignedIn();
  const start = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/console/signups', { body: { businessName, email, password } })),
  });
  const verify = useMutation({
    mutationFn: (id: string) =>
      unwrap(
        api.POST('/v1/console/signups/{id}/verify', {
          params: { path: { id } },
          body: { code: code.trim() },
        }),
      ),
    onSuccess: signedIn,
  });
  if (start.data) {
    const { verificationId, email: sentTo } = start.data;
    return (
      <Door title="Check your email">
        <p>We sent a six-digit code to {sentTo}. It works for 10 minutes.</p>
        <form
          onSubmit={(event) => {
            event.preventDefault();
            verify.mutate(verificationId);
          }}
          noValidate
        >
          <Field
            label="Code"
            name="code"
            inputMode="numeric"
            autoComplete="one-time-code"
            value={code}
            onChange={setCode}
            error={verify.error}
            required
          />
          <FormProblem error={verify.error} fields={['code']} />
          <button type="submit" className="primary" disabled={verify.isPending}>
            Verify and continue
          </button>
        </form>
      </Door>
    );
  }
  return (
    <Door title="Create your account">
      <form
        onSubmit={(event) => {
          event.preventDefault();
          start.mutate();
        }}
        noValidate
      >
        <Field
          label="Business name"
          name="businessName"
          autoComplete="organization"
          value={businessName}
          onChange={setBusinessName}
          error={start.error}
          required
        />
        <Field
          label="Email"
          name="email"
          type="email"
          autoComplete="email"
          value={email}
          onChange={setEmail}
          error={start.error}
          required
        />
        <Field
          label="Password"
          name="password"
          type="password"
          autoComplete="new-password"
          hint="8 characters or more"
          value={password}
          onChange={setPassword}
          error={start.error}
          required
        />
        <FormProblem error={start.error} fields={['businessName', 'email', 'password']} />
        <button type="submit" className="primary" disabled={start.isPending}>
          Email me a code
        </button>
      </form>
      <p>
        Have an account? <Link to="/sign-in">Sign in</Link>
      </p>
    </Door>
  );
}

/** The page an invitation's link opens; its secret is in the fragment, which no server sees. */
export function AcceptInvitation() {
  const token = new URLSearchParams(window.location.hash.slice(1)).get('token') ?? '';
  const [password, setPassword] = useState('');
  const signedIn = useSignedIn();
  const invitation = useQuery({
    queryKey: ['invitation', token],
    queryFn: () => unwrap(api.POST('/v1/console/invitations/lookup', { body: { token } })),
    enabled: token !== '',
    retry: false,
  });
  const accept = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/console/invitations/accept', { body: { token, password } })),
    onSuccess: signedIn,
  });
  if (token === '')
    return (
      <Door title="Invitation">
        {<p>This link has no invitation in it. Open the link from the email again.</p>}
      </Door>
    );
  if (invitation.isPending) return <Door title="Invitation">{<Loading what="the invitation" />}</Door>;
  if (invitation.error)
    return (
      <Door title="Invitation">
        <Failed error={invitation.error} />
        <p>
          <Link to="/sign-in">Sign in</Link>
        </p>
      </Door>
    );
  const { provider, email, role, accountExists } = invitation.data;
  return (
    <Door title={`Join ${provider.displayName}`}>
      <p>
        You are invited as <strong>{role}</strong>, with {email}.
        {accountExists ? ' Enter your password to join.' : ' Choose a password for your new account.'}
      </p>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          accept.mutate();
        }}
        noValidate
      >
        <Field
          label="Password"
          name="password"
          type="password"
          autoComplete={accountExists ? 'current-password' : 'new-password'}
          hint={accountExists ? undefined : '8 characters or more'}
          value={password}
          onChange={setPassword}
          error={accept.error}
          required
        />
        <FormProblem error={accept.error} fields={['password']} />
        <button type="submit" className="primary" disabled={accept.isPending}>
          Join the team
        </button>
      </form>
    </Door>
  );
}
