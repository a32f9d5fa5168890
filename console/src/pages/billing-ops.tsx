import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link } from '@tanstack/react-router';
import { useState } from 'react';
import { ApiProblem, api, minorOf, money, unwrap } from '../api';
import { mayIntegrate, mayManage, useEnvironment, useSession } from '../session';
import { dateTime, Empty, Field, FormProblem, Loaded, Page, Select, SubNav, Table } from '../ui';

/** The pages of Billing; test clocks are a sandbox tool. */
export function BillingNav() {
  return (
    <SubNav
      label="Billing"
      links={[
        { to: '/billing', label: 'Invoices and payments' },
        { to: '/billing/coupons', label: 'Coupons' },
        { to: '/billing/disputes', label: 'Disputes' },
        { to: '/billing/payouts', label: 'Payouts' },
        { to: '/billing/test-clocks', label: 'Test clocks' },
      ]}
    />
  );
}

/** A transaction's JSON list (the operation also answers CSV; JSON is asked for). */
async function payments() {
  const answer = await unwrap(
    api.GET('/v1/ui/transactions', { params: { query: { limit: 50, type: 'payment', format: 'json' } } }),
  );
  if (typeof answer === 'string') throw new Error('The transactions came back as CSV');
  return answer;
}

/**
 * Disputes: what the bank took back while each is open, the evidence sent, and the outcome. In
 * sandbox a dispute can be opened on a payment and closed either way, to try the flow.
 */
export function Disputes() {
  const session = useSession();
  const [environment] = useEnvironment();
  const client = useQueryClient();
  const disputes = useQuery({
    queryKey: ['disputes'],
    queryFn: () => unwrap(api.GET('/v1/ui/disputes', { params: { query: { limit: 50 } } })),
  });
  const manager = session.data !== undefined && mayManage(session.data.role);
  const sandbox = environment === 'sandbox';
  const paid = useQuery({ enabled: sandbox && manager, queryKey: ['payments'], queryFn: payments });
  const refresh = () => void client.invalidateQueries({ queryKey: ['disputes'] });
  const [answering, setAnswering] = useState<string | undefined>(undefined);
  const [evidence, setEvidence] = useState('');
  const submit = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.POST('/v1/ui/disputes/{id}/evidence', { params: { path: { id } }, body: { evidence } })),
    onSuccess: () => {
      setAnswering(undefined);
      setEvidence('');
      refresh();
    },
  });
  const close = useMutation({
    mutationFn: (input: { id: string; outcome: 'won' | 'lost' }) =>
      unwrap(
        api.POST('/v1/sdk/sandbox/disputes/{id}/close', {
          params: { path: { id: input.id } },
          body: { outcome: input.outcome },
        }),
      ),
    onSettled: refresh,
  });
  const [paymentId, setPaymentId] = useState('');
  const open = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/sdk/sandbox/disputes', { body: { transactionId: paymentId } })),
    onSuccess: refresh,
  });
  return (
    <Page title="Disputes">
      <BillingNav />
      <Loaded
        query={disputes}
        what="disputes"
        isEmpty={(d) => d.data.length === 0}
        empty={<p>No disputes: none of your payments has been contested.</p>}
      >
        {(d) => (
          <Table
            caption="Disputes, newest first"
            rows={d.data}
            rowKey={(row) => row.id}
            columns={[
              { header: 'Dispute', cell: (row) => <code>{row.id}</code> },
              {
                header: 'Customer',
                cell: (row) => (
                  <Link to="/customers/$customerRef" params={{ customerRef: row.customerRef }}>
                    {row.customerRef}
                  </Link>
                ),
              },
              { header: 'Amount', numeric: true, cell: (row) => money(row.amount, row.currency) },
              { header: 'Reason', cell: (row) => row.reason },
              { header: 'Status', cell: (row) => row.status.replace('_', ' ') },
              { header: 'Opened (UTC)', cell: (row) => dateTime(row.createdAt) },
              {
                header: 'Evidence and outcome',
                cell: (row) => (
                  <>
                    {row.evidence !== null && <p className="muted">{row.evidence}</p>}
                    {manager && row.status === 'needs_response' && answering !== row.id && (
                      <button
                        type="button"
                        aria-label={`Respond to ${row.id}`}
                        onClick={() => setAnswering(row.id)}
                      >
                        Respond
                      </button>
                    )}
                    {answering === row.id && (
                      <form
                        aria-label={`Evidence for ${row.id}`}
                        noValidate
                        onSubmit={(event) => {
                          event.preventDefault();
                          submit.mutate(row.id);
                        }}
                      >
                        <div className="field">
                          <label htmlFor="field-evidence">Your answer to the bank</label>
                          <textarea
                            id="field-evidence"
                            name="evidence"
                            rows={4}
                            value={evidence}
                            onChange={(e) => setEvidence(e.target.value)}
                          />
                        </div>
                        <FormProblem error={submit.error} />
                        <button type="submit" className="primary" disabled={submit.isPending}>
                          Submit evidence
                        </button>
                      </form>
                    )}
                    {manager &&
                      sandbox &&
                      (row.status === 'needs_response' || row.status === 'under_review') && (
                        <div className="row">
                          {(['won', 'lost'] as const).map((outcome) => (
                            <button
                              key={outcome}
                              type="button"
                              aria-label={`Close as ${outcome}: ${row.id}`}
                              onClick={() => close.mutate({ id: row.id, outcome })}
                              disabled={close.isPending}
                            >
                              Close as {outcome}
                            </button>
                          ))}
                        </div>
                      )}
                  </>
                ),
              },
            ]}
          />
        )}
      </Loaded>
      <FormProblem error={close.error} />
      {manager && sandbox && (
        <form
          className="card"
          aria-labelledby="simulate-dispute"
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            open.mutate();
          }}
        >
          <h2 id="simulate-dispute">Simulate a dispute (sandbox)</h2>
          <Select
            label="Payment"
            name="transactionId"
            value={paymentId}
            onChange={setPaymentId}
            options={[
              { value: '', label: paid.isPending ? 'Loading payments…' : 'Choose a payment' },
              ...(paid.data?.data ?? []).map((t) => ({
                value: t.id,
                label: `${money(t.amount, t.currency)} · ${t.description} · ${dateTime(t.createdAt)}`,
              })),
            ]}
          />
          <FormProblem error={open.error} fields={['transactionId']} />
          <button type="submit" className="primary" disabled={open.isPending || paymentId === ''}>
            Open a dispute
          </button>
        </form>
      )}
    </Page>
  );
}

/** Payouts to the provider's bank; in sandbox one can be sent (or made to fail) to try the flow. */
export function Payouts() {
  const session = useSession();
  const [environment] = useEnvironment();
  const client = useQueryClient();
  const payouts = useQuery({
    queryKey: ['payouts'],
    queryFn: () => unwrap(api.GET('/v1/ui/payouts', { params: { query: { limit: 50 } } })),
  });
  const [amount, setAmount] = useState('');
  const [failure, setFailure] = useState('');
  const send = useMutation({
    mutationFn: () => {
      // Sandbox payouts are of the usd balance (the API's default currency).
      const cents = minorOf(amount, 'usd');
      if (amount.trim() !== '' && (cents === undefined || cents === 0))
        throw new ApiProblem(400, 'validation_failed', 'The amount must be such as 25.00', [
          { path: '/amount', message: 'must be an amount such as 25.00, or empty for the whole balance' },
        ]);
      return unwrap(
        api.POST('/v1/sdk/sandbox/payouts', {
          body: { ...(cents === undefined ? {} : { amount: cents }), ...(failure ? { failure } : {}) },
        }),
      );
    },
    onSuccess: () => {
      setAmount('');
      setFailure('');
      void client.invalidateQueries({ queryKey: ['payouts'] });
    },
  });
  const manager = session.data !== undefined && mayManage(session.data.role);
  return (
    <Page title="Payouts">
      <BillingNav />
      <Loaded
        query={payouts}
        what="payouts"
        isEmpty={(p) => p.data.length === 0}
        empty={<p>No payouts yet: the balance is paid out on the processor's schedule.</p>}
      >
        {(p) => (
          <Table
            caption="Payouts, newest first"
            rows={p.data}
            rowKey={(row) => row.id}
            columns={[
              { header: 'Payout', cell: (row) => <code>{row.id}</code> },
              { header: 'Amount', numeric: true, cell: (row) => money(row.amount, row.currency) },
              {
                header: 'Status',
                cell: (row) => (row.failureReason ? `${row.status}: ${row.failureReason}` : row.status),
              },
              { header: 'Arrives (UTC)', cell: (row) => dateTime(row.arrivalDate) },
              { header: 'Made', cell: (row) => (row.automatic ? 'on schedule' : 'on request') },
            ]}
          />
        )}
      </Loaded>
      {manager && environment === 'sandbox' && (
        <form
          className="card"
          aria-labelledby="simulate-payout"
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            send.mutate();
          }}
        >
          <h2 id="simulate-payout">Send a payout (sandbox)</h2>
          <Field
            label="Amount"
            name="amount"
            inputMode="decimal"
            value={amount}
            onChange={setAmount}
            error={send.error}
            hint="Empty: the whole available balance"
          />
          <Field
            label="Make it fail with"
            name="failure"
            value={failure}
            onChange={setFailure}
            error={send.error}
            hint="A reason such as account_closed, or empty for a payout that arrives"
          />
          <FormProblem error={send.error} fields={['amount', 'failure']} />
          <button type="submit" className="primary" disabled={send.isPending}>
            Send payout
          </button>
        </form>
      )}
    </Page>
  );
}

/** `datetime-local` input text (taken as UTC) to ISO 8601, or undefined when it is not a time. */
function isoOf(local: string): string | undefined {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(local)) return undefined;
  const date = new Date(`${local}Z`);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

const timeProblem = new ApiProblem(400, 'validation_failed', 'Choose a date and time', [
  { path: '/frozenTime', message: 'must be a date and time (UTC)' },
]);

/** Sandbox test clocks: a frozen time that customers attached to it live in, advanced at will. */
export function TestClocks() {
  const session = useSession();
  const [environment] = useEnvironment();
  const client = useQueryClient();
  const sandbox = environment === 'sandbox';
  const clocks = useQuery({
    enabled: sandbox,
    queryKey: ['test-clocks'],
    queryFn: () => unwrap(api.GET('/v1/sdk/test-clocks')),
  });
  const refresh = () => void client.invalidateQueries({ queryKey: ['test-clocks'] });
  const [name, setName] = useState('');
  const [start, setStart] = useState('');
  const create = useMutation({
    mutationFn: () => {
      const frozenTime = isoOf(start);
      if (frozenTime === undefined) throw timeProblem;
      return unwrap(api.POST('/v1/sdk/test-clocks', { body: { frozenTime, ...(name ? { name } : {}) } }));
    },
    onSuccess: () => {
      setName('');
      refresh();
    },
  });
  const [targets, setTargets] = useState<Record<string, string>>({});
  const advance = useMutation({
    mutationFn: (id: string) => {
      const frozenTime = isoOf(targets[id] ?? '');
      if (frozenTime === undefined) throw timeProblem;
      return unwrap(
        api.POST('/v1/sdk/test-clocks/{id}/advance', { params: { path: { id } }, body: { frozenTime } }),
      );
    },
    onSettled: refresh,
  });
  const canChange = session.data !== undefined && mayIntegrate(session.data.role);
  return (
    <Page title="Test clocks">
      <BillingNav />
      {!sandbox ? (
        <Empty>
          <p>Test clocks are a sandbox tool: switch to Sandbox to move time for test customers.</p>
        </Empty>
      ) : (
        <>
          <p className="muted">
            Customers made on a clock live in its time: advance it to see renewals, invoices, trials ending
            and dunning happen, with their webhooks.
          </p>
          <Loaded
            query={clocks}
            what="test clocks"
            isEmpty={(c) => c.data.length === 0}
            empty={<p>No test clocks yet.</p>}
          >
            {(c) => (
              <Table
                caption="Test clocks"
                rows={c.data}
                rowKey={(row) => row.id}
                columns={[
                  { header: 'Clock', cell: (row) => row.name ?? <code>{row.id}</code> },
                  { header: 'Its time (UTC)', cell: (row) => dateTime(row.frozenTime) },
                  { header: 'Status', cell: (row) => row.status },
                  {
                    header: 'Advance',
                    cell: (row) =>
                      canChange && (
                        <form
                          className="row"
                          aria-label={`Advance ${row.name ?? row.id}`}
                          noValidate
                          onSubmit={(event) => {
                            event.preventDefault();
                            advance.mutate(row.id);
                          }}
                        >
                          <Field
                            label={`New time of ${row.name ?? row.id} (UTC)`}
                            name={`advance-${row.id}`}
                            type="datetime-local"
                            value={targets[row.id] ?? ''}
                            onChange={(value) => setTargets((t) => ({ ...t, [row.id]: value }))}
                          />
                          <button type="submit" disabled={advance.isPending}>
                            Advance
                          </button>
                        </form>
                      ),
                  },
                ]}
              />
            )}
          </Loaded>
          <FormProblem error={advance.error} />
          {canChange && (
            <form
              className="card"
              aria-labelledby="new-clock"
              noValidate
              onSubmit={(event) => {
                event.preventDefault();
                create.mutate();
              }}
            >
              <h2 id="new-clock">New test clock</h2>
              <Field label="Clock name" name="name" value={name} onChange={setName} error={create.error} />
              <Field
                label="Starts at (UTC)"
                name="frozenTime"
                type="datetime-local"
                value={start}
                onChange={setStart}
                error={create.error}
              />
              <FormProblem error={create.error} fields={['name', 'frozenTime']} />
              <button type="submit" className="primary" disabled={create.isPending}>
                Create clock
              </button>
            </form>
          )}
        </>
      )}
    </Page>
  );
}
