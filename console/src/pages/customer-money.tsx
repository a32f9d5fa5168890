import { useMutation, useQuery } from '@tanstack/react-query';
import { api, money, unwrap } from '../api';
import { dateTime, FormProblem, Loaded, Table } from '../ui';

/**
 * A customer's money and access: their invoices, credit balance and cards, and a button that
 * ends every sign-in they have (their access tokens stop working at once).
 */
export function CustomerMoney(props: { customerRef: string; canChange: boolean }) {
  const { customerRef } = props;
  const invoices = useQuery({
    queryKey: ['invoices', customerRef],
    queryFn: () => unwrap(api.GET('/v1/sdk/invoices', { params: { query: { customerRef, limit: 20 } } })),
  });
  const balance = useQuery({
    queryKey: ['balance', customerRef],
    queryFn: () =>
      unwrap(api.GET('/v1/sdk/customers/{ref}/balance', { params: { path: { ref: customerRef } } })),
  });
  const cards = useQuery({
    queryKey: ['payment-methods', customerRef],
    queryFn: () =>
      unwrap(api.GET('/v1/sdk/customers/{ref}/payment-methods', { params: { path: { ref: customerRef } } })),
  });
  const revoke = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/v1/sdk/customers/{ref}/tokens/revoke', { params: { path: { ref: customerRef } } })),
  });
  return (
    <>
      <h2>Credits</h2>
      <Loaded query={balance} what="the credit balance">
        {(b) => (
          <p>
            <strong data-testid="credits">{b.credits}</strong> credits
          </p>
        )}
      </Loaded>
      <h2>Invoices</h2>
      <Loaded
        query={invoices}
        what="invoices"
        isEmpty={(i) => i.data.length === 0}
        empty={<p>No invoices.</p>}
      >
        {(i) => (
          <Table
            caption="Invoices of the customer"
            rows={i.data}
            rowKey={(invoice) => invoice.id}
            columns={[
              {
                header: 'Invoice',
                cell: (invoice) =>
                  invoice.hostedUrl ? (
                    <a href={invoice.hostedUrl}>{invoice.id}</a>
                  ) : (
                    <code>{invoice.id}</code>
                  ),
              },
              { header: 'Status', cell: (invoice) => invoice.status },
              { header: 'Total', cell: (invoice) => money(invoice.total, invoice.currency) },
              { header: 'Created (UTC)', cell: (invoice) => dateTime(invoice.createdAt) },
            ]}
          />
        )}
      </Loaded>
      <h2>Payment methods</h2>
      <Loaded
        query={cards}
        what="payment methods"
        isEmpty={(c) => c.data.length === 0}
        empty={<p>No card on file.</p>}
      >
        {(c) => (
          <ul>
            {c.data.map((card) => (
              <li key={card.id}>
                {card.brand} ending {card.last4}, expires {card.expMonth}/{card.expYear}
                {card.isDefault ? ' (default)' : ''}
              </li>
            ))}
          </ul>
        )}
      </Loaded>
      {props.canChange && (
        <>
          <h2>Sign-ins</h2>
          <p className="muted">Ends every sign-in of this customer: their MCP clients must sign in again.</p>
          <button type="button" onClick={() => revoke.mutate()} disabled={revoke.isPending}>
            Revoke the customer’s sign-ins
          </button>
          {revoke.isSuccess && (
            <p role="status">Every sign-in before {dateTime(revoke.data.revokedBefore)} is revoked.</p>
          )}
          <FormProblem error={revoke.error} />
        </>
      )}
    </>
  );
}
