import { useMutation, useQuery } from '@tanstack/react-query';
import { api, money, unwrap } from '../api';
import { dateTime, Empty, Failed, FormProblem, Loading } from '../ui';

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
      {balance.isPending ? (
        <Loading what="the credit balance" />
      ) : balance.error ? (
        <Failed error={balance.error} retry={() => void balance.refetch()} />
      ) : (
        <p>
          <strong data-testid="credits">{balance.data.credits}</strong> credits
        </p>
      )}
      <h2>Invoices</h2>
      {invoices.isPending ? (
        <Loading what="invoices" />
      ) : invoices.error ? (
        <Failed error={invoices.error} retry={() => void invoices.refetch()} />
      ) : invoices.data.data.length === 0 ? (
        <Empty>
          <p>No invoices.</p>
        </Empty>
      ) : (
        <table>
          <caption className="visually-hidden">Invoices of the customer</caption>
          <thead>
            <tr>
              <th scope="col">Invoice</th>
              <th scope="col">Status</th>
              <th scope="col">Total</th>
              <th scope="col">Created (UTC)</th>
            </tr>
          </thead>
          <tbody>
            {invoices.data.data.map((invoice) => (
              <tr key={invoice.id}>
                <td>
                  {invoice.hostedUrl ? (
                    <a href={invoice.hostedUrl}>{invoice.id}</a>
                  ) : (
                    <code>{invoice.id}</code>
                  )}
                </td>
                <td>{invoice.status}</td>
                <td>{money(invoice.total, invoice.currency)}</td>
                <td>{dateTime(invoice.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Payment methods</h2>
      {cards.isPending ? (
        <Loading what="payment methods" />
      ) : cards.error ? (
        <Failed error={cards.error} retry={() => void cards.refetch()} />
      ) : cards.data.data.length === 0 ? (
        <Empty>
          <p>No card on file.</p>
        </Empty>
      ) : (
        <ul>
          {cards.data.data.map((card) => (
            <li key={card.id}>
              {card.brand} ending {card.last4}, expires {card.expMonth}/{card.expYear}
              {card.isDefault ? ' (default)' : ''}
            </li>
          ))}
        </ul>
      )}
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
