import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { ApiProblem, api, unwrap } from '../api';
import { dateTime, Field, FormProblem, Loaded, Table } from '../ui';
import { CustomerEvents } from './events';

/**
 * A customer's activity: every credit movement with the balance after it (grants, top-ups,
 * debits, adjustments, usage), a grant form for managers, and the events about them.
 */
export function CustomerActivity(props: { customerRef: string; canChange: boolean }) {
  const { customerRef } = props;
  const client = useQueryClient();
  const movements = useQuery({
    queryKey: ['credits', customerRef],
    queryFn: () =>
      unwrap(
        api.GET('/v1/sdk/customers/{ref}/credits', {
          params: { path: { ref: customerRef }, query: { limit: 50 } },
        }),
      ),
  });
  const [amount, setAmount] = useState('');
  const [reason, setReason] = useState('');
  // One key per grant typed: a double click or a retry grants once.
  const [attempt, setAttempt] = useState(() => crypto.randomUUID());
  const grant = useMutation({
    mutationFn: () => {
      if (!/^[1-9]\d{0,11}$/.test(amount.trim()))
        throw new ApiProblem(400, 'validation_failed', 'A whole number of credits', [
          { path: '/amount', message: 'must be a whole number of credits, 1 or more' },
        ]);
      return unwrap(
        api.POST('/v1/sdk/customers/{ref}/credits', {
          params: { path: { ref: customerRef } },
          body: { kind: 'grant', amount: Number(amount.trim()), ...(reason ? { reason } : {}) },
          headers: { 'Idempotency-Key': `console-grant-${attempt}` },
        }),
      );
    },
    onSuccess: () => {
      setAmount('');
      setReason('');
      setAttempt(crypto.randomUUID());
      void client.invalidateQueries({ queryKey: ['credits', customerRef] });
      void client.invalidateQueries({ queryKey: ['balance', customerRef] });
      void client.invalidateQueries({ queryKey: ['events', 'customer', customerRef] });
    },
  });
  return (
    <>
      <h2>Credit movements</h2>
      <Loaded
        query={movements}
        what="credit movements"
        isEmpty={(m) => m.data.length === 0}
        empty={<p>No credits have moved for this customer.</p>}
      >
        {(m) => (
          <Table
            caption="Credit movements, newest first"
            rows={m.data}
            rowKey={(row) => row.id}
            columns={[
              { header: 'When (UTC)', cell: (row) => dateTime(row.createdAt) },
              { header: 'Kind', cell: (row) => row.kind.replace('_', ' ') },
              {
                header: 'Credits',
                numeric: true,
                cell: (row) => (row.amount > 0 ? `+${row.amount}` : row.amount),
              },
              { header: 'Balance after', numeric: true, cell: (row) => row.balance },
              { header: 'Reason', cell: (row) => row.reason ?? '' },
            ]}
          />
        )}
      </Loaded>
      {props.canChange && (
        <form
          className="card"
          aria-labelledby="grant-title"
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            grant.mutate();
          }}
        >
          <h3 id="grant-title">Grant credits</h3>
          <Field
            label="Credits to grant"
            name="amount"
            inputMode="numeric"
            value={amount}
            onChange={setAmount}
            error={grant.error}
          />
          <Field label="Reason" name="reason" value={reason} onChange={setReason} error={grant.error} />
          <FormProblem error={grant.error} fields={['amount', 'reason']} />
          <button type="submit" className="primary" disabled={grant.isPending}>
            Grant credits
          </button>
        </form>
      )}
      <h2>Events</h2>
      <CustomerEvents customerRef={customerRef} />
    </>
  );
}
