import { type UseQueryResult, useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, money, unwrap } from '../api';
import { dateTime, Field, FormProblem, Loaded, Table } from '../ui';

type Page = Awaited<ReturnType<typeof listPurchases>>;
type Purchase = Page['data'][number];
type Discount = NonNullable<Purchase['discount']>;

const listPurchases = (customerRef: string) =>
  unwrap(api.GET('/v1/sdk/purchases', { params: { query: { customerRef, limit: 20 } } }));

/** Statuses whose purchase still has invoices to come: a discount can change them. */
const BILLABLE = ['pending', 'trialing', 'active', 'past_due'];

/** What a discount takes off and until when, in a few words. */
function discountText(d: Discount): string {
  const off = d.percentOff !== null ? `${d.percentOff}%` : money(d.amountOff ?? 0, d.currency ?? 'usd');
  const span =
    d.end !== null ? `until ${dateTime(d.end)}` : d.duration === 'once' ? 'next invoice' : 'forever';
  return `${d.name}: ${off} off, ${span}`;
}

/** Why a purchase was cancelled (docs/billing.md), in the customer's choice of words. */
const FEEDBACK: Record<string, string> = {
  too_expensive: 'too expensive',
  missing_features: 'missing features',
  switched_service: 'switched service',
  unused: 'not used enough',
  customer_service: 'customer service',
  too_complex: 'too complex',
  low_quality: 'low quality',
  other: 'other',
};

function StatusCell(props: { purchase: Purchase }) {
  const { purchase } = props;
  const why = purchase.cancellationDetails;
  const reason =
    why === null
      ? null
      : why.reason === 'payment_failed'
        ? 'payment failed'
        : why.feedback === null
          ? 'asked to cancel'
          : (FEEDBACK[why.feedback] ?? why.feedback);
  return (
    <>
      {purchase.status}
      {purchase.cancelAtPeriodEnd && ' (cancels at period end)'}
      {reason !== null && (
        <>
          <br />
          <small>
            Why: {reason}
            {why?.comment != null && (
              <>
                {' '}
                <q>{why.comment}</q>
              </>
            )}
          </small>
        </>
      )}
    </>
  );
}

/**
 * A customer's purchases with their discounts; a manager redeems a coupon (its id or code) on a
 * purchase in force, or removes its discount (docs/coupons.md).
 */
export function CustomerPurchases(props: {
  customerRef: string;
  query: UseQueryResult<Page>;
  canChange: boolean;
}) {
  const client = useQueryClient();
  const refresh = () => void client.invalidateQueries({ queryKey: ['purchases', props.customerRef] });
  const [coupons, setCoupons] = useState<Record<string, string>>({});
  const apply = useMutation({
    mutationFn: (ref: string) =>
      unwrap(
        api.POST('/v1/sdk/purchases/{ref}/discount', {
          params: { path: { ref } },
          body: { coupon: (coupons[ref] ?? '').trim() },
        }),
      ),
    onSuccess: (_, ref) => {
      setCoupons((c) => ({ ...c, [ref]: '' }));
      refresh();
      // The coupon was redeemed once more: the Coupons page's count moved.
      void client.invalidateQueries({ queryKey: ['coupons'] });
    },
  });
  const remove = useMutation({
    mutationFn: (ref: string) =>
      unwrap(api.DELETE('/v1/sdk/purchases/{ref}/discount', { params: { path: { ref } } })),
    onSettled: refresh,
  });
  return (
    <>
      <Loaded
        query={props.query}
        what="purchases"
        isEmpty={(p) => p.data.length === 0}
        empty={<p>No purchases.</p>}
      >
        {(p) => (
          <Table
            caption="Purchases"
            rows={p.data}
            rowKey={(purchase) => purchase.id}
            columns={[
              { header: 'Plan', cell: (purchase) => <code>{purchase.planRef}</code> },
              { header: 'Status', cell: (purchase) => <StatusCell purchase={purchase} /> },
              { header: 'Amount', cell: (purchase) => money(purchase.amount, purchase.currency) },
              {
                header: 'Period ends',
                cell: (purchase) => (purchase.periodEnd ? dateTime(purchase.periodEnd) : '—'),
              },
              {
                header: 'Discount',
                cell: (purchase) => (purchase.discount === null ? '—' : discountText(purchase.discount)),
              },
              {
                header: 'Coupon',
                hiddenHeader: true,
                cell: (purchase) =>
                  props.canChange &&
                  BILLABLE.includes(purchase.status) && (
                    <div className="row">
                      <form
                        className="row"
                        aria-label={`Redeem a coupon on ${purchase.planRef}`}
                        noValidate
                        onSubmit={(event) => {
                          event.preventDefault();
                          apply.mutate(purchase.id);
                        }}
                      >
                        <Field
                          label={`Coupon for ${purchase.planRef}`}
                          name={`coupon-${purchase.id}`}
                          value={coupons[purchase.id] ?? ''}
                          onChange={(value) => setCoupons((c) => ({ ...c, [purchase.id]: value }))}
                        />
                        <button type="submit" disabled={apply.isPending}>
                          Apply
                        </button>
                      </form>
                      {purchase.discount !== null && (
                        <button
                          type="button"
                          onClick={() => remove.mutate(purchase.id)}
                          disabled={remove.isPending}
                        >
                          Remove discount
                        </button>
                      )}
                    </div>
                  ),
              },
            ]}
          />
        )}
      </Loaded>
      <FormProblem error={apply.error ?? remove.error} />
    </>
  );
}
