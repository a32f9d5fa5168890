import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * The ledger, the transactions listing and the financial reports, over a quarter walked with the
 * clock: three monthly payments of $10.00 with a 2.9% + 30¢ platform fee, a partial refund, and
 * a payment in another currency. Every figure is worked by hand in the comments, and the reports
 * are reconciled against the raw ledger entries.
 */
const clock = new MovableClock(new Date('2026-01-15T00:00:00.000Z'));
let harness: TestControlPlane;
let api: (
  method: 'GET' | 'POST',
  url: string,
  body?: unknown,
) => Promise<{ status: number; body: Json; text: string; type: string }>;
let providerId: string;

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

beforeAll(async () => {
  harness = await startTestControlPlane({
    bodyLimitBytes: 1024 * 1024,
    clock,
    platformFee: { bps: 290, fixed: 30 },
  });
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Ledgerly' });
  providerId = provider.id;
  api = async (method, url, body) => {
    const response = await harness.controlPlane.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${sandboxKey}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    const type = String(response.headers['content-type'] ?? '');
    return {
      status: response.statusCode,
      body: type.startsWith('application/json') ? (response.json() as Json) : {},
      text: response.body,
      type,
    };
  };
});
afterAll(() => harness?.close());

const run = () => harness.controlPlane.scheduler.runDue();

describe('ledger, transactions and financial reports', () => {
  let febPayment: string;

  it('writes a balanced ledger transaction for every payment and refund', async () => {
    const product = (await api('POST', '/v1/ui/products', { name: 'Reports' })).body;
    const monthly = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Monthly',
        type: 'recurring',
        price: 1000,
        billingCycle: 'monthly',
      })
    ).body;
    const euros = (await api('POST', '/v1/ui/products', { name: 'Euro tools' })).body;
    const euroPlan = (
      await api('POST', `/v1/ui/products/${euros.id}/plans`, {
        name: 'Einmal',
        type: 'one-time',
        price: 500,
        currency: 'eur',
      })
    ).body;
    const customer = (await api('POST', '/v1/sdk/customers', { externalRef: 'ledger-user' })).body.reference;
    await api('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
      card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
    });

    // Jan 15: $10.00 for Jan 15 – Feb 15. Feb 15 and Mar 15: renewals. Feb 20: €5.00 once.
    clock.set(new Date('2026-01-15T00:00:00.000Z'));
    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: monthly.id })).body.status,
    ).toBe('activated');
    clock.set(new Date('2026-02-15T00:00:00.000Z'));
    await run();
    clock.set(new Date('2026-02-20T00:00:00.000Z'));
    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: euroPlan.id })).body.status,
    ).toBe('activated');
    clock.set(new Date('2026-03-15T00:00:00.000Z'));
    await run();

    const payments = (await api('GET', '/v1/ui/transactions?type=payment&currency=usd&limit=100')).body.data;
    expect(payments.map((t: Json) => [t.amount, t.fee, t.net, t.createdAt])).toEqual([
      // 2.9% of 1000 = 29, plus 30: 59.
      [1000, 59, 941, '2026-01-15T00:00:00.000Z'],
      [1000, 59, 941, '2026-02-15T00:00:00.000Z'],
      [1000, 59, 941, '2026-03-15T00:00:00.000Z'],
    ]);
    febPayment = payments[1].id;

    // Mar 1: $4.00 of February's payment back (the fee is kept).
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const refund = await api('POST', '/v1/ui/transactions/refunds', {
      originalTransactionId: febPayment,
      refundAmount: 400,
    });
    expect(refund.status).toBe(202);

    const all = (await api('GET', '/v1/ui/transactions?limit=100')).body.data;
    expect(all.map((t: Json) => [t.type, t.amount, t.fee, t.net, t.currency])).toEqual([
      ['payment', 1000, 59, 941, 'usd'],
      ['payment', 1000, 59, 941, 'usd'],
      // 2.9% of 500 = 14.5 → 14 (half to even), plus 30: 44.
      ['payment', 500, 44, 456, 'eur'],
      ['refund', -400, 0, -400, 'usd'],
      ['payment', 1000, 59, 941, 'usd'],
    ]);
    expect(all[3]).toMatchObject({
      paymentId: payments[1].paymentId,
      customerRef: customer,
      source: refund.body.id,
    });

    // Every transaction balances, and the database refuses one that does not, or any change.
    const { rows } = await harness.pool.query(
      'SELECT transaction_id, sum(amount)::int AS total FROM ledger_entries WHERE provider_id = $1 GROUP BY 1',
      [providerId],
    );
    expect(rows.length).toBe(5);
    expect(rows.every((r) => r.total === 0)).toBe(true);
    await expect(
      harness.pool.query(
        `INSERT INTO ledger_entries (id, provider_id, environment, transaction_id, kind, account, amount, currency, source_id, description, occurred_at)
         VALUES ('le_bad', $1, 'sandbox', 'txn_bad', 'cost', 'costs', 5, 'usd', 'x', 'one-sided', now())`,
        [providerId],
      ),
    ).rejects.toThrow(/does not balance/);
    await expect(
      harness.pool.query('UPDATE ledger_entries SET amount = amount + 1 WHERE provider_id = $1', [
        providerId,
      ]),
    ).rejects.toThrow(/never changed/);
  });

  it('pages transactions by cursor, filters them, and exports them as CSV', async () => {
    const first = (await api('GET', '/v1/ui/transactions?limit=2')).body;
    const second = (await api('GET', `/v1/ui/transactions?limit=2&cursor=${first.nextCursor}`)).body;
    const third = (await api('GET', `/v1/ui/transactions?limit=2&cursor=${second.nextCursor}`)).body;
    expect([...first.data, ...second.data, ...third.data].map((t: Json) => t.type)).toEqual([
      'payment',
      'payment',
      'payment',
      'refund',
      'payment',
    ]);
    expect(third.nextCursor).toBeNull();
    expect((await api('GET', '/v1/ui/transactions?type=refund')).body.data).toHaveLength(1);
    expect(
      (await api('GET', '/v1/ui/transactions?from=2026-02-01&to=2026-03-01')).body.data.map(
        (t: Json) => t.amount,
      ),
    ).toEqual([1000, 500]);
    expect((await api('GET', '/v1/ui/transactions?customerRef=ledger-user')).body.data).toHaveLength(5);
    expect((await api('GET', '/v1/ui/transactions?customerRef=nobody')).body.data).toEqual([]);
    expect((await api('GET', '/v1/ui/transactions?cursor=bm9wZQ')).status).toBe(400);
    expect((await api('GET', '/v1/ui/transactions?from=yesterday')).status).toBe(400);
    expect((await api('GET', '/v1/ui/transactions?type=gift')).status).toBe(400);

    const csv = await api('GET', '/v1/ui/transactions?format=csv&currency=usd');
    expect(csv.status).toBe(200);
    expect(csv.type).toBe('text/csv; charset=utf-8');
    const lines = csv.text.trim().split('\n');
    expect(lines[0]).toBe(
      'id,type,amount,fee,net,currency,customerRef,paymentId,source,description,createdAt',
    );
    expect(lines.slice(1).map((l) => l.split(',').slice(1, 6).join(','))).toEqual([
      'payment,1000,59,941,usd',
      'payment,1000,59,941,usd',
      'refund,-400,0,-400,usd',
      'payment,1000,59,941,usd',
    ]);
    expect((await api('GET', '/v1/ui/transactions?format=csv&from=nope')).status).toBe(400);
  });

  it('reports profit and loss of a quarter, worked by hand', async () => {
    clock.set(new Date('2026-04-10T00:00:00.000Z'));
    const pnl = await api('GET', '/v1/ui/financials/pnl?period=q1-2026');
    expect(pnl.status).toBe(200);
    expect(pnl.body).toMatchObject({ periodLabel: 'Q1 2026', currency: 'usd', otherCurrencies: ['eur'] });
    // Gross 3 × 1000; refunds 400; fees 3 × 59 = 177; net 2423.
    // Earned in Q1: January's and February's payments whole (their months end by Mar 15), and
    // March's for Mar 15 – Apr 1: 17 of 31 days of 1000 = 548.39 → 548. Total 2548; deferred 452.
    expect(pnl.body.current).toEqual({
      grossRevenue: 3000,
      refunds: 400,
      disputes: 0,
      platformFees: 177,
      netRevenue: 2423,
      costOfRevenue: 0,
      recognisedRevenue: 2548,
      deferredRevenue: 452,
      hasCostTransactions: false,
      grossProfit: { amount: 2423 },
      grossMargin: { basisPoints: 10000, percent: 100 },
    });
    expect(pnl.body.prior).toMatchObject({ periodLabel: 'Q4 2025', grossRevenue: 0, recognisedRevenue: 0 });
    // January earns Jan 15 – Feb 1 of its payment (17 of 31 days: 548); February the rest (452)
    // and Feb 15 – Mar 1 of February's (14 of 28 days: 500); March February's rest (500) and
    // March's 548.
    expect(
      pnl.body.monthly.map((m: Json) => [
        m.month,
        m.revenue.grossRevenue,
        m.revenue.recognisedRevenue,
        m.revenue.deferredRevenue,
      ]),
    ).toEqual([
      ['2026-01', 1000, 548, 452],
      ['2026-02', 1000, 952, 500],
      ['2026-03', 1000, 1048, 452],
    ]);
    const eur = (await api('GET', '/v1/ui/financials/pnl?period=q1-2026&currency=EUR')).body;
    expect(eur).toMatchObject({ currency: 'eur', otherCurrencies: ['usd'] });
    expect(eur.current).toMatchObject({
      grossRevenue: 500,
      platformFees: 44,
      netRevenue: 456,
      recognisedRevenue: 500,
    });
    expect((await api('GET', '/v1/ui/financials/pnl?period=q5-2026')).status).toBe(400);
    expect((await api('GET', '/v1/ui/financials/pnl?currency=dollars')).status).toBe(400);
  });

  it('reports cash flow that reconciles with the ledger, month by month', async () => {
    const flow = (await api('GET', '/v1/ui/financials/cashflow?period=q1-2026')).body;
    expect(flow.current).toEqual({
      openingBalance: 0,
      paymentsReceived: 3000,
      refundsIssued: 400,
      disputes: 0,
      platformFees: 177,
      costsPaid: 0,
      payouts: 0,
      closingBalance: 2423,
      netChange: 2423,
    });
    expect(
      flow.monthly.map((m: Json) => [m.month, m.balance.openingBalance, m.balance.closingBalance]),
    ).toEqual([
      ['2026-01', 0, 941],
      ['2026-02', 941, 1882],
      ['2026-03', 1882, 2423],
    ]);
    // The same figures straight from the ledger's entries.
    const { rows } = await harness.pool.query<{ account: string; total: number }>(
      `SELECT account, sum(amount)::int AS total FROM ledger_entries
        WHERE provider_id = $1 AND currency = 'usd' AND occurred_at >= '2026-01-01' AND occurred_at < '2026-04-01'
        GROUP BY account`,
      [providerId],
    );
    const ledger = Object.fromEntries(rows.map((r) => [r.account, r.total]));
    expect(ledger).toEqual({ processor_balance: 2423, revenue: -3000, refunds: 400, platform_fees: 177 });
    const c = flow.current;
    expect(c.closingBalance).toBe(
      c.openingBalance +
        c.paymentsReceived -
        c.refundsIssued -
        c.disputes -
        c.platformFees -
        c.costsPaid -
        c.payouts,
    );
    const year = (await api('GET', '/v1/ui/financials/cashflow?period=this-year')).body;
    expect(year.periodLabel).toBe('2026');
    expect(year.monthly).toHaveLength(12);
    expect(year.current.closingBalance).toBe(2423);
    const sum = (key: string) => year.monthly.reduce((total: number, m: Json) => total + m.balance[key], 0);
    expect(sum('netChange')).toBe(year.current.netChange);
    expect(sum('paymentsReceived')).toBe(3000);
  });
});
