import { useMutation, useQueryClient } from '@tanstack/react-query';
import { Link, Navigate, Outlet, useNavigate } from '@tanstack/react-router';
import { ApiProblem, api, setCsrfToken, unwrap } from './api';
import { useEnvironment, useSession } from './session';
import { Failed, Loading } from './ui';

const NAV = [
  { to: '/', label: 'Overview' },
  { to: '/catalog', label: 'Catalog' },
  { to: '/mcp-servers', label: 'MCP servers' },
  { to: '/usage', label: 'Usage' },
  { to: '/revenue', label: 'Revenue' },
  { to: '/funnel', label: 'Paywall funnel' },
  { to: '/customers', label: 'Customers' },
  { to: '/billing', label: 'Billing' },
  { to: '/developers', label: 'Developers' },
  { to: '/settings', label: 'Settings' },
  { to: '/settings/team', label: 'Team' },
  { to: '/settings/audit', label: 'Audit log' },
] as const;

/** Every signed-in page: the provider, the sandbox/live switch, the menu, who is signed in. */
export function Shell() {
  const session = useSession();
  const [environment, setEnvironment] = useEnvironment();
  const client = useQueryClient();
  const navigate = useNavigate();
  const signOut = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/console/session')),
    onSettled: () => {
      setCsrfToken(undefined);
      client.clear();
      void navigate({ to: '/sign-in' });
    },
  });

  if (session.isPending) return <Loading what="your session" />;
  if (session.error instanceof ApiProblem && session.error.status === 401) return <Navigate to="/sign-in" />;
  if (session.error) return <Failed error={session.error} retry={() => void session.refetch()} />;
  const { provider, user, role } = session.data;
  const live = environment === 'live';

  return (
    <div className={live ? 'shell live' : 'shell sandbox'}>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <span className="brand">{provider.displayName}</span>
        <fieldset className="env-switch">
          <legend className="visually-hidden">Environment</legend>
          {(['sandbox', 'live'] as const).map((value) => (
            <label key={value} className={environment === value ? 'chosen' : ''}>
              <input
                type="radio"
                name="environment"
                value={value}
                checked={environment === value}
                disabled={value === 'live' && !provider.liveEnabled}
                onChange={() => setEnvironment(value)}
              />
              {value === 'sandbox' ? 'Sandbox' : 'Live'}
            </label>
          ))}
        </fieldset>
        <Link to="/account" className="who">
          <span className="visually-hidden">Your account: </span>
          {user.email} · {role}
        </Link>
        <button type="button" onClick={() => signOut.mutate()} disabled={signOut.isPending}>
          Sign out
        </button>
      </header>
      {!live && (
        <p className="env-banner" role="note">
          Sandbox: test data, no real money moves.
          {!provider.liveEnabled && ' Live mode is not enabled for this provider yet.'}
        </p>
      )}
      <div className="frame">
        <nav aria-label="Console">
          <ul>
            {NAV.map((item) => (
              <li key={item.to}>
                <Link
                  to={item.to}
                  activeOptions={{ exact: item.to === '/' || item.to === '/settings' }}
                  activeProps={{ 'aria-current': 'page' }}
                >
                  {item.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          <Outlet key={environment} />
        </main>
      </div>
    </div>
  );
}
