import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link } from '@tanstack/react-router';
import { useState } from 'react';
import { ApiProblem, amountExample, api, minorOf, money, unwrap } from '../api';
import { mayManage, useSession } from '../session';
import { Checkbox, dateTime, Field, FormProblem, Loaded, Page, Select, Table } from '../ui';
import { BillingNav } from './billing-ops';

type Kind = 'percent' | 'amount';
type Duration = 'once' | 'repeating' | 'forever';

const KINDS = [
  { value: 'percent', label: 'A percentage' },
  { value: 'amount', label: 'A fixed amount' },
] as const;
const DURATIONS = [
  { value: 'once', label: 'The first invoice' },
  { value: 'repeating', label: 'A number of months' },
  { value: 'forever', label: 'Every invoice' },
] as const;

/** How long a coupon lasts, in words. */
function lasts(c: { duration: Duration; durationInMonths: number | null }): string {
  if (c.duration === 'once') return 'first invoice';
  if (c.duration === 'forever') return 'forever';
  const months = c.durationInMonths ?? 0;
  return `${months} month${months === 1 ? '' : 's'}`;
}

const problem = (path: string, message: string) =>
  new ApiProblem(400, 'validation_failed', message, [{ path, message }]);

/** A datetime-local value (UTC) as ISO 8601, or undefined when it is not one. */
function isoOf(local: string): string | undefined {
  const at = new Date(`${local}:00Z`);
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

/**
 * Coupons (docs/coupons.md): what each takes off, for how long, how often it was redeemed; a new
 * one made here, an old one archived. Customers redeem them through the activation, checkout or
 * the API; this page only offers them.
 */
export function Coupons() {
  const session = useSession();
  const client = useQueryClient();
  const coupons = useQuery({
    queryKey: ['coupons'],
    queryFn: () => unwrap(api.GET('/v1/sdk/coupons', { params: { query: { limit: 100 } } })),
  });
  const products = useQuery({
    queryKey: ['products'],
    queryFn: () => unwrap(api.GET('/v1/ui/products', { params: { query: { limit: 100 } } })),
  });
  const productName = (id: string) => products.data?.data.find((p) => p.id === id)?.name ?? id;
  const refresh = () => void client.invalidateQueries({ queryKey: ['coupons'] });
  const [name, setName] = useState('');
  const [code, setCode] = useState('');
  const [kind, setKind] = useState<Kind>('percent');
  const [value, setValue] = useState('');
  const [currency, setCurrency] = useState('usd');
  const [duration, setDuration] = useState<Duration>('once');
  const [months, setMonths] = useState('3');
  const [maxRedemptions, setMaxRedemptions] = useState('');
  const [redeemBy, setRedeemBy] = useState('');
  const [firstTimeOnly, setFirstTimeOnly] = useState(false);
  const [minimum, setMinimum] = useState('');
  const [productIds, setProductIds] = useState<string[]>([]);
  const [forCustomer, setForCustomer] = useState('');
  // The currency field serves an amount off and a minimum purchase alike (one currency for both).
  const needsCurrency = kind === 'amount' || minimum.trim() !== '';
  const create = useMutation({
    mutationFn: () => {
      const off =
        kind === 'percent'
          ? (() => {
              const percent = Number(value);
              if (value.trim() === '' || !Number.isFinite(percent))
                throw problem('/percentOff', 'must be a percentage such as 20 or 12.5');
              return { percentOff: percent };
            })()
          : (() => {
              const minor = minorOf(value, currency);
              if (minor === undefined || minor === 0)
                throw problem('/amountOff', `must be an amount such as ${amountExample(currency, 5)}`);
              return { amountOff: minor, currency };
            })();
      const until = redeemBy === '' ? undefined : isoOf(redeemBy);
      if (redeemBy !== '' && until === undefined) throw problem('/redeemBy', 'must be a date and time');
      let least: { minimumAmount: number; minimumAmountCurrency: string } | undefined;
      if (minimum.trim() !== '') {
        const minor = minorOf(minimum, currency);
        if (minor === undefined || minor === 0)
          throw problem('/minimumAmount', `must be an amount such as ${amountExample(currency, 50)}`);
        least = { minimumAmount: minor, minimumAmountCurrency: currency };
      }
      const max = maxRedemptions.trim() === '' ? undefined : Number(maxRedemptions);
      if (max !== undefined && !Number.isInteger(max))
        throw problem('/maxRedemptions', 'must be a whole number, or empty for no limit');
      return unwrap(
        api.POST('/v1/sdk/coupons', {
          body: {
            name,
            ...(code.trim() === '' ? {} : { code: code.trim() }),
            ...off,
            duration,
            ...(duration === 'repeating' ? { durationInMonths: Number(months) } : {}),
            ...(max === undefined ? {} : { maxRedemptions: max }),
            ...(until === undefined ? {} : { redeemBy: until }),
            ...(firstTimeOnly ? { firstTimeOnly } : {}),
            ...least,
            ...(productIds.length > 0 ? { productIds } : {}),
            ...(forCustomer.trim() === '' ? {} : { customerRef: forCustomer.trim() }),
          },
        }),
      );
    },
    onSuccess: () => {
      setName('');
      setCode('');
      setValue('');
      setFirstTimeOnly(false);
      setMinimum('');
      setProductIds([]);
      setForCustomer('');
      refresh();
    },
  });
  const archive = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.POST('/v1/sdk/coupons/{id}/archive', { params: { path: { id } } })),
    onSettled: refresh,
  });
  const canChange = session.data !== undefined && mayManage(session.data.role);
  return (
    <Page title="Coupons">
      <BillingNav />
      <Loaded
        query={coupons}
        what="coupons"
        isEmpty={(c) => c.data.length === 0}
        empty={<p>No coupons yet: make one below to offer a discount.</p>}
      >
        {(c) => (
          <Table
            caption="Coupons"
            rows={c.data}
            rowKey={(row) => row.id}
            columns={[
              { header: 'Coupon', cell: (row) => row.name },
              { header: 'Code', cell: (row) => (row.code === null ? '—' : <code>{row.code}</code>) },
              {
                header: 'Off',
                numeric: true,
                cell: (row) =>
                  row.percentOff !== null
                    ? `${row.percentOff}%`
                    : money(row.amountOff ?? 0, row.currency ?? 'usd'),
              },
              { header: 'For', cell: (row) => lasts(row) },
              {
                header: 'Products',
                cell: (row) =>
                  row.productIds.length === 0
                    ? 'all, and top-ups'
                    : row.productIds.map(productName).join(', '),
              },
              {
                header: 'Who',
                cell: (row) => (
                  <>
                    {row.customerRef === null ? (
                      row.firstTimeOnly ? (
                        'customers who never paid'
                      ) : (
                        'any customer'
                      )
                    ) : (
                      <>
                        <Link to="/customers/$customerRef" params={{ customerRef: row.customerRef }}>
                          {row.customerRef}
                        </Link>
                        {row.firstTimeOnly ? ' only, before a first payment' : ' only'}
                      </>
                    )}
                    {row.minimumAmount === null
                      ? ''
                      : `, on purchases from ${money(row.minimumAmount, row.minimumAmountCurrency ?? 'usd')}`}
                  </>
                ),
              },
              {
                header: 'Redeemed',
                numeric: true,
                cell: (row) =>
                  row.maxRedemptions === null
                    ? `${row.timesRedeemed}`
                    : `${row.timesRedeemed} of ${row.maxRedemptions}`,
              },
              {
                header: 'Redeem by (UTC)',
                nowrap: true,
                cell: (row) => (row.redeemBy ? dateTime(row.redeemBy) : '—'),
              },
              {
                header: 'Status',
                cell: (row) =>
                  row.status === 'archived' ? 'archived' : row.valid ? 'active' : 'used up or expired',
              },
              {
                header: 'Actions',
                hiddenHeader: true,
                cell: (row) =>
                  canChange &&
                  row.status === 'active' && (
                    <button type="button" onClick={() => archive.mutate(row.id)} disabled={archive.isPending}>
                      Archive {row.name}
                    </button>
                  ),
              },
            ]}
          />
        )}
      </Loaded>
      <FormProblem error={archive.error} />
      {canChange && (
        <form
          className="card"
          aria-labelledby="new-coupon"
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            create.mutate();
          }}
        >
          <h2 id="new-coupon">New coupon</h2>
          <Field
            label="Coupon name"
            name="name"
            value={name}
            onChange={setName}
            error={create.error}
            hint="Shown to customers on checkout and invoices"
          />
          <Field
            label="Code"
            name="code"
            value={code}
            onChange={setCode}
            error={create.error}
            hint="Optional: what a customer types, such as LAUNCH20"
          />
          <Select<Kind> label="Takes off" name="kind" value={kind} onChange={setKind} options={KINDS} />
          <Field
            label={kind === 'percent' ? 'Percent off' : 'Amount off'}
            name={kind === 'percent' ? 'percentOff' : 'amountOff'}
            value={value}
            onChange={setValue}
            error={create.error}
            inputMode="decimal"
          />
          <Field
            label="Minimum purchase"
            name="minimumAmount"
            value={minimum}
            onChange={setMinimum}
            error={create.error}
            inputMode="decimal"
            hint="Optional: the least a plan's price for a period and setup fee must come to"
          />
          {needsCurrency && (
            <Field
              label="Currency"
              name="currency"
              value={currency}
              onChange={setCurrency}
              error={create.error}
              hint={
                kind === 'amount'
                  ? 'ISO 4217, such as usd or eur: of the amount off and any minimum purchase'
                  : 'ISO 4217, such as usd or eur: of the minimum purchase'
              }
            />
          )}
          <Select<Duration>
            label="Applies to"
            name="duration"
            value={duration}
            onChange={setDuration}
            options={DURATIONS}
          />
          {duration === 'repeating' && (
            <Field
              label="Months"
              name="durationInMonths"
              value={months}
              onChange={setMonths}
              error={create.error}
              inputMode="numeric"
            />
          )}
          <Field
            label="Most redemptions"
            name="maxRedemptions"
            value={maxRedemptions}
            onChange={setMaxRedemptions}
            error={create.error}
            inputMode="numeric"
            hint="Optional: how many purchases may use it"
          />
          <Field
            label="Redeem by (UTC)"
            name="redeemBy"
            type="datetime-local"
            value={redeemBy}
            onChange={setRedeemBy}
            error={create.error}
            hint="Optional: the last moment it can be used"
          />
          <Field
            label="For one customer"
            name="customerRef"
            value={forCustomer}
            onChange={setForCustomer}
            error={create.error}
            hint="Optional: the customer's id or your reference for them; no one else may redeem it"
          />
          {(products.data?.data.length ?? 0) > 0 && (
            <fieldset className="choices" aria-describedby="productIds-hint">
              <legend>Products</legend>
              <small id="productIds-hint" className="muted">
                Optional: the products whose plans it takes money off; none ticked, every product and credit
                top-ups
              </small>
              {products.data?.data
                .filter((p) => p.status === 'active')
                .map((product) => (
                  <Checkbox
                    key={product.id}
                    label={product.name}
                    name={`product-${product.id}`}
                    checked={productIds.includes(product.id)}
                    onChange={(on) =>
                      setProductIds((ids) =>
                        on ? [...ids, product.id] : ids.filter((id) => id !== product.id),
                      )
                    }
                  />
                ))}
            </fieldset>
          )}
          <div className="choices">
            <Checkbox
              label="First purchase only"
              name="firstTimeOnly"
              checked={firstTimeOnly}
              onChange={setFirstTimeOnly}
              hint="Only customers who have never paid may redeem it"
            />
          </div>
          <FormProblem
            error={create.error}
            fields={[
              'name',
              'code',
              'percentOff',
              'amountOff',
              'currency',
              'minimumAmount',
              'customerRef',
              'durationInMonths',
              'maxRedemptions',
              'redeemBy',
            ]}
          />
          <button type="submit" className="primary" disabled={create.isPending}>
            Create coupon
          </button>
        </form>
      )}
    </Page>
  );
}
