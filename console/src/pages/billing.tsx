import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { ApiProblem, amountExample, api, minorOf, money, unwrap } from '../api';
import { mayManage, useSession } from '../session';
import { dateTime, Field, FormProblem, Loaded, Page, Table } from '../ui';
import { BillingNav } from './billing-ops';

/** Invoices (finalize a draft, void an open one, the hosted copy and PDF) and money moved (refund a payment). */
export function Billing() {
  const session = useSession();
  const client = useQueryClient();
  const invoices = useQuery({
    queryKey: ['invoices'],
    queryFn: () => unwrap(api.GET('/v1/sdk/invoices', { params: { query: { limit: 50 } } })),
  });
  const transactions = useQuery({
    queryKey: ['transactions'],
    queryFn: async () => {
      const answer = await unwrap(
        api.GET('/v1/ui/transactions', { params: { query: { limit: 50, format: 'json' } } }),
      );
      // The operation also answers CSV (format=csv); JSON is asked for here.
      if (typeof answer === 'string') throw new Error('The transactions came back as CSV');
      return answer;
    },
  });
  const refreshAll = () => {
    void client.invalidateQueries({ queryKey: ['invoices'] });
    void client.invalidateQueries({ queryKey: ['transactions'] });
  };
  const finalize = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.POST('/v1/sdk/invoices/{id}/finalize', { params: { path: { id } } })),
    onSettled: refreshAll,
  });
  const voidInvoice = useMutation({
    mutationFn: (id: string) => unwrap(api.POST('/v1/sdk/invoices/{id}/void', { params: { path: { id } } })),
    onSettled: refreshAll,
  });
  const [refunding, setRefunding] = useState<string | undefined>(undefined);
  const [amount, setAmount] = useState('');
  const refund = useMutation({
    mutationFn: (payment: { id: string; currency: string }) => {
      const refundAmount = minorOf(amount, payment.currency);
      const example = amountExample(payment.currency, 3);
      // Empty refunds what is left; anything else must read as an amount, never as "all".
      if (amount.trim() !== '' && (refundAmount === undefined || refundAmount === 0))
        throw new ApiProblem(400, 'validation_failed', `The amount must be such as ${example}`, [
          {
            path: '/refundAmount',
            message: `must be an amount such as ${example}, or empty to refund what is left`,
          },
        ]);
      return unwrap(
        api.POST('/v1/ui/transactions/refunds', {
          body: {
            originalTransactionId: payment.id,
            reason: 'requested_by_customer',
            ...(refundAmount === undefined ? {} : { refundAmount }),
          },
        }),
      );
    },
    onSuccess: () => {
      setRefunding(undefined);
      setAmount('');
      refreshAll();
    },
  });
  const manager = session.data !== undefined && mayManage(session.data.role);
  return (
    <Page title="Billing">
      <BillingNav />
      <h2>Invoices</h2>
      <Loaded
        query={invoices}
        what="invoices"
        isEmpty={(i) => i.data.length === 0}
        empty={<p>No invoices yet: each purchase's periods close into one.</p>}
      >
        {(i) => (
          <Table
            caption="Invoices, newest first"
            rows={i.data}
            rowKey={(invoice) => invoice.id}
            columns={[
              { header: 'Invoice', cell: (invoice) => <code>{invoice.id}</code> },
              { header: 'Customer', cell: (invoice) => <code>{invoice.customerRef}</code> },
              { header: 'Status', cell: (invoice) => invoice.status },
              { header: 'Total', cell: (invoice) => money(invoice.total, invoice.currency) },
              { header: 'Created (UTC)', cell: (invoice) => dateTime(invoice.createdAt) },
              {
                header: 'Actions',
                hiddenHeader: true,
                cell: (invoice) => (
                  <div className="row">
                    {invoice.hostedUrl && <a href={invoice.hostedUrl}>View {invoice.id}</a>}
                    {invoice.pdfUrl && <a href={invoice.pdfUrl}>PDF of {invoice.id}</a>}
                    {manager && invoice.status === 'draft' && (
                      <button
                        type="button"
                        onClick={() => finalize.mutate(invoice.id)}
                        disabled={finalize.isPending}
                      >
                        Finalize {invoice.id}
                      </button>
                    )}
                    {manager && invoice.status === 'open' && (
                      <button
                        type="button"
                        onClick={() => voidInvoice.mutate(invoice.id)}
                        disabled={voidInvoice.isPending}
                      >
                        Void {invoice.id}
                      </button>
                    )}
                  </div>
                ),
              },
            ]}
          />
        )}
      </Loaded>
      <FormProblem error={finalize.error ?? voidInvoice.error} />
      <h2>Transactions</h2>
      <Loaded
        query={transactions}
        what="transactions"
        isEmpty={(t) => t.data.length === 0}
        empty={<p>No money has moved yet.</p>}
      >
        {(list) => (
          <Table
            caption="Transactions, newest first"
            rows={list.data}
            rowKey={(t) => t.id}
            columns={[
              { header: 'When (UTC)', cell: (t) => dateTime(t.createdAt) },
              { header: 'Type', cell: (t) => t.type },
              { header: 'Amount', cell: (t) => money(t.amount, t.currency) },
              { header: 'Net', cell: (t) => money(t.net, t.currency) },
              { header: 'Description', cell: (t) => t.description },
              {
                header: 'Actions',
                hiddenHeader: true,
                cell: (t) => (
                  <>
                    {manager && t.type === 'payment' && refunding !== t.id && (
                      <button type="button" onClick={() => setRefunding(t.id)}>
                        Refund {t.id}
                      </button>
                    )}
                    {refunding === t.id && (
                      <form
                        aria-label={`Refund ${t.id}`}
                        onSubmit={(event) => {
                          event.preventDefault();
                          refund.mutate(t);
                        }}
                        noValidate
                      >
                        <Field
                          label="Amount to refund"
                          name="refundAmount"
                          inputMode="decimal"
                          value={amount}
                          onChange={setAmount}
                          error={refund.error}
                          hint={`Empty: all that is left of ${money(t.amount, t.currency)}`}
                        />
                        <FormProblem error={refund.error} fields={['refundAmount']} />
                        <div className="row">
                          <button type="submit" className="primary" disabled={refund.isPending}>
                            Issue refund
                          </button>
                          <button type="button" onClick={() => setRefunding(undefined)}>
                            Cancel
                          </button>
                        </div>
                      </form>
                    )}
                  </>
                ),
              },
            ]}
          />
        )}
      </Loaded>
    </Page>
  );
}
