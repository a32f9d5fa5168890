import { useQuery } from '@tanstack/react-query';
import { Link, useParams } from '@tanstack/react-router';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { DailyChart } from '../chart';
import { mayManage, useSession } from '../session';
import { dateTime, Empty, Failed, Field, Loading, Page } from '../ui';
import { CustomerBillingDetails } from './billing-details';
import { CustomerActivity } from './customer-activity';
import { CustomerMoney } from './customer-money';
import { CustomerPurchases } from './customer-purchases';

/** Customers: search by email or external reference, a page at a time. */
export function Customers() {
  const [search, setSearch] = useState('');
  const [query, setQuery] = useState('');
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const customers = useQuery({
    queryKey: ['customers', query, cursor],
    queryFn: () =>
      unwrap(
        api.GET('/v1/sdk/customers', {
          params: {
            query: {
              limit: 25,
              ...(cursor ? { cursor } : {}),
              ...(query === '' ? {} : query.includes('@') ? { email: query } : { externalRef: query }),
            },
          },
        }),
      ),
  });
  return (
    <Page title="Customers">
      <search>
        <form
          className="row"
          onSubmit={(event) => {
            event.preventDefault();
            setCursors([]);
            setQuery(search.trim());
          }}
        >
          <Field label="Email or external reference" name="search" value={search} onChange={setSearch} />
          <button type="submit">Search</button>
        </form>
      </search>
      {customers.isPending ? (
        <Loading what="customers" />
      ) : customers.error ? (
        <Failed error={customers.error} retry={() => void customers.refetch()} />
      ) : customers.data.data.length === 0 ? (
        <Empty>
          <p>
            {query
              ? `No customer matches ${query}.`
              : 'No customers yet: they appear when someone signs in or buys.'}
          </p>
        </Empty>
      ) : (
        <>
          <table>
            <caption className="visually-hidden">Customers</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Email</th>
                <th scope="col">External reference</th>
                <th scope="col">Since</th>
              </tr>
            </thead>
            <tbody>
              {customers.data.data.map((customer) => (
                <tr key={customer.id}>
                  <td>
                    <Link to="/customers/$customerRef" params={{ customerRef: customer.id }}>
                      {customer.name ?? customer.id}
                    </Link>
                  </td>
                  <td>{customer.email ?? '—'}</td>
                  <td>{customer.externalRef ?? '—'}</td>
                  <td>{dateTime(customer.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <div className="row">
            {cursors.length > 0 && (
              <button type="button" onClick={() => setCursors(cursors.slice(0, -1))}>
                Previous page
              </button>
            )}
            {customers.data.nextCursor && (
              <button
                type="button"
                onClick={() => setCursors([...cursors, customers.data.nextCursor as string])}
              >
                Next page
              </button>
            )}
          </div>
        </>
      )}
    </Page>
  );
}

/**
 * One customer, in three views of at most three API calls each: usage (the last 30 days, and
 * what they bought), money (invoices, credits, cards, and revoking their sign-ins), and activity
 * (every credit movement, and the events about them).
 */
export function CustomerPage() {
  const { customerRef } = useParams({ strict: false }) as { customerRef: string };
  const session = useSession();
  const [view, setView] = useState<'usage' | 'money' | 'activity'>('usage');
  const customer = useQuery({
    queryKey: ['customer', customerRef],
    queryFn: () => unwrap(api.GET('/v1/sdk/customers/{ref}', { params: { path: { ref: customerRef } } })),
  });
  const purchases = useQuery({
    enabled: view === 'usage',
    queryKey: ['purchases', customerRef],
    queryFn: () => unwrap(api.GET('/v1/sdk/purchases', { params: { query: { customerRef, limit: 20 } } })),
  });
  const daily = useQuery({
    enabled: view === 'usage',
    queryKey: ['daily', customerRef],
    queryFn: () => unwrap(api.GET('/ui/analytics/daily', { params: { query: { customerRef } } })),
  });
  if (customer.isPending) return <Loading what="the customer" />;
  if (customer.error) return <Failed error={customer.error} retry={() => void customer.refetch()} />;
  const c = customer.data;
  return (
    <Page title={c.name ?? c.email ?? c.id}>
      <p className="muted">
        <Link to="/customers">Customers</Link> · <code>{c.id}</code>
        {c.email ? ` · ${c.email}` : ''}
        {c.externalRef ? ` · ${c.externalRef}` : ''}
      </p>
      <fieldset className="row views">
        <legend className="visually-hidden">View</legend>
        <button type="button" aria-pressed={view === 'usage'} onClick={() => setView('usage')}>
          Usage and purchases
        </button>
        <button type="button" aria-pressed={view === 'money'} onClick={() => setView('money')}>
          Invoices, credits and cards
        </button>
        <button type="button" aria-pressed={view === 'activity'} onClick={() => setView('activity')}>
          Credit movements and events
        </button>
      </fieldset>
      {view === 'activity' ? (
        <CustomerActivity
          customerRef={customerRef}
          canChange={session.data !== undefined && mayManage(session.data.role)}
        />
      ) : view === 'money' ? (
        <>
          <CustomerMoney
            customerRef={customerRef}
            canChange={session.data !== undefined && mayManage(session.data.role)}
          />
          <CustomerBillingDetails
            customer={c}
            canChange={session.data !== undefined && mayManage(session.data.role)}
          />
        </>
      ) : (
        <>
          <h2>Usage, last 30 days</h2>
          {daily.isPending ? (
            <Loading what="usage" />
          ) : daily.error ? (
            <Failed error={daily.error} retry={() => void daily.refetch()} />
          ) : (
            <DailyChart
              label="Calls"
              days={daily.data.data.map((d) => ({ date: d.date, value: d.records }))}
            />
          )}
          <h2>Purchases</h2>
          <CustomerPurchases
            customerRef={customerRef}
            query={purchases}
            canChange={session.data !== undefined && mayManage(session.data.role)}
          />
        </>
      )}
    </Page>
  );
}
