import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createRootRoute, createRoute, createRouter, Outlet, RouterProvider } from '@tanstack/react-router';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { ApiProblem } from './api';
import { Account } from './pages/account';
import { AcceptInvitation, SignIn, SignUp } from './pages/auth';
import { Billing } from './pages/billing';
import { Disputes, Payouts, TestClocks } from './pages/billing-ops';
import { Catalog, ProductPage } from './pages/catalog';
import { Coupons } from './pages/coupons';
import { CustomerEmails } from './pages/customer-emails';
import { CustomerPage, Customers } from './pages/customers';
import { Developers } from './pages/developers';
import { Events } from './pages/events';
import { Funnel } from './pages/funnel';
import { McpServerPage } from './pages/mcp-server';
import { McpServers } from './pages/mcp-servers';
import { Overview } from './pages/overview';
import { Revenue } from './pages/revenue';
import { Settings } from './pages/settings';
import { Audit, Team } from './pages/team';
import { Usage } from './pages/usage';
import { Shell } from './shell';
import './styles.css';

const root = createRootRoute({ component: Outlet });
const app = createRoute({ getParentRoute: () => root, id: 'app', component: Shell });
const page = (path: string, component: () => React.ReactNode) =>
  createRoute({ getParentRoute: () => app, path, component });

const routeTree = root.addChildren([
  createRoute({ getParentRoute: () => root, path: '/sign-in', component: SignIn }),
  createRoute({ getParentRoute: () => root, path: '/sign-up', component: SignUp }),
  createRoute({ getParentRoute: () => root, path: '/accept-invitation', component: AcceptInvitation }),
  app.addChildren([
    page('/', Overview),
    page('/account', Account),
    page('/catalog', Catalog),
    page('/catalog/$productId', ProductPage),
    page('/mcp-servers', McpServers),
    page('/mcp-servers/$serverId', McpServerPage),
    page('/usage', Usage),
    page('/revenue', Revenue),
    page('/funnel', Funnel),
    page('/customers', Customers),
    page('/customers/$customerRef', CustomerPage),
    page('/billing', Billing),
    page('/billing/coupons', Coupons),
    page('/billing/disputes', Disputes),
    page('/billing/payouts', Payouts),
    page('/billing/test-clocks', TestClocks),
    page('/developers', Developers),
    page('/developers/events', Events),
    page('/settings', Settings),
    page('/settings/emails', CustomerEmails),
    page('/settings/team', Team),
    page('/settings/audit', Audit),
  ]),
]);

const router = createRouter({ routeTree, basepath: '/console', defaultPreload: false });

declare module '@tanstack/react-router' {
  interface Register {
    router: typeof router;
  }
}

/** Pages that need no session: a 401 there is an answer to show, not a reason to leave. */
const PUBLIC_PAGES = ['/console/sign-in', '/console/sign-up', '/console/accept-invitation'];

/** A session that ended (idle, signed out elsewhere, removed from the team) goes to sign-in. */
function signInAgain(error: unknown) {
  // A wrong password (401 invalid_credentials) is a form's answer; only a missing or ended session leaves.
  if (!(error instanceof ApiProblem) || error.status !== 401) return;
  if (error.code !== 'session_expired' && error.code !== 'unauthorized') return;
  if (PUBLIC_PAGES.includes(window.location.pathname)) return;
  queryClient.clear();
  void router.navigate({ to: '/sign-in' });
}

const queryClient: QueryClient = new QueryClient({
  queryCache: new QueryCache({ onError: signInAgain }),
  mutationCache: new MutationCache({ onError: signInAgain }),
  defaultOptions: {
    queries: {
      // A refusal is an answer: only a network failure or a 5xx is worth one more try.
      retry: (failures, error) =>
        failures < 1 && !(error instanceof ApiProblem && error.status >= 400 && error.status < 500),
      refetchOnWindowFocus: false,
      staleTime: 10_000,
    },
  },
});

const element = document.getElementById('root');
if (element === null) throw new Error('no #root element');
createRoot(element).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <RouterProvider router={router} />
    </QueryClientProvider>
  </StrictMode>,
);
