import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Revenue analytics over five and a half months walked with the clock, day by day with the
 * scheduler running: 28 generated customers subscribe, renew, switch plans, cancel, come back,
 * take trials, pay setup fees, buy once and buy credits, get refunds and lose disputes. The test
 * keeps its own account of what each customer pays and is worth a month (from the plans' prices
 * and its own calendar, never from the service), and checks every figure of every month against
 * it to the cent; then the months' money against the P&L, and sandbox against live.
 */
const DAY = 86_400_000;
const START = Date.UTC(2026, 0, 1, 10);
const LAST_DAY = 170; // 2026-06-20, 10:00 UTC
const FEE = { bps: 290, fixed: 30 };
const clock = new MovableClock(new Date(START));

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;
type Api = (method: string, url: string, body?: unknown) => Promise<{ status: number; body: Json }>;

let harness: TestControlPlane;
let sandbox: Api;
let live: Api;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, platformFee: FEE });
  const { sandboxKey, liveKey } = await harness.controlPlane.providers.create({ displayName: 'Revenue Co' });
  const as =
    (key: string): Api =>
    async (method, url, body) => {
      const response = await harness.controlPlane.app.inject({
        method: method as 'GET',
        url,
        headers: { authorization: `Bearer ${key}` },
        ...(body === undefined ? {} : { payload: body as object }),
      });
      return { status: response.statusCode, body: response.json() as Json };
    };
  sandbox = as(sandboxKey);
  live = as(liveKey);
});
afterAll(() => harness?.close());

/** Seeded, so a failure replays. */
function random(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

// ---- The test's own account of the business ----------------------------------------------

type Cycle = 'weekly' | 'monthly' | 'quarterly' | 'yearly';
interface PlanSpec {
  key: string;
  product: string;
  type: 'recurring' | 'one-time';
  price: number;
  cycle?: Cycle;
  setupFee?: number;
  trialDays?: number;
}
const PLANS: PlanSpec[] = [
  { key: 'basic', product: 'agents', type: 'recurring', price: 1000, cycle: 'monthly' },
  { key: 'pro', product: 'agents', type: 'recurring', price: 3000, cycle: 'monthly' },
  { key: 'annual', product: 'agents', type: 'recurring', price: 24_000, cycle: 'yearly' },
  { key: 'weekly', product: 'search', type: 'recurring', price: 700, cycle: 'weekly' },
  { key: 'quarterly', product: 'reports', type: 'recurring', price: 4500, cycle: 'quarterly' },
  { key: 'setup', product: 'hosting', type: 'recurring', price: 500, cycle: 'monthly', setupFee: 2000 },
  { key: 'trial', product: 'studio', type: 'recurring', price: 1500, cycle: 'monthly', trialDays: 14 },
  { key: 'once', product: 'export', type: 'one-time', price: 5000 },
  { key: 'free', product: 'community', type: 'recurring', price: 0, cycle: 'monthly' },
];
const plan = (key: string) => PLANS.find((p) => p.key === key) as PlanSpec;

/** A month's worth of a price, as an exact fraction [numerator, denominator]. */
function monthly(p: PlanSpec): [bigint, bigint] {
  const price = BigInt(p.price);
  switch (p.cycle) {
    case 'monthly':
      return [price, 1n];
    case 'quarterly':
      return [price, 3n];
    case 'yearly':
      return [price, 12n];
    case 'weekly':
      // 365.25 days ÷ 12 months ÷ 7 days a week = 1461 ÷ 336 weeks a month.
      return [price * 1461n, 336n];
    default:
      return [0n, 1n];
  }
}

/** The next period boundary after `from` for a plan started at `anchor`. */
function boundaryAfter(p: PlanSpec, anchor: number, from: number): number {
  const a = new Date(anchor);
  for (let k = 1; ; k++) {
    const t =
      p.cycle === 'weekly'
        ? anchor + 7 * k * DAY
        : Date.UTC(
            a.getUTCFullYear(),
            a.getUTCMonth() + k * (p.cycle === 'yearly' ? 12 : p.cycle === 'quarterly' ? 3 : 1),
            a.getUTCDate(),
            10,
          );
    if (t > from) return t;
  }
}

const halfEven = (n: bigint, d: bigint) => {
  const q = n / d;
  const r2 = (n % d) * 2n;
  return Number(r2 > d || (r2 === d && q % 2n === 1n) ? q + 1n : q);
};

interface Sub {
  customer: string;
  plan: PlanSpec;
  purchaseRef: string;
  /** When the paid periods are anchored (the trial's end for a trial). */
  anchor: number;
  periodStart: number;
  periodEnd: number;
  trialing: boolean;
  cancelAtEnd: boolean;
  ended: boolean;
  lastPayment: number;
}

interface Money {
  at: number;
  customer: string;
  amount: number;
  kind: 'recurring' | 'oneTime' | 'credits' | 'refund' | 'dispute';
}

const subs: Sub[] = [];
const money: Money[] = [];
/** Each payment received: its amount carries the platform's fee. */
const payments: Array<{ at: number; customer: string; amount: number }> = [];
/** When each customer first had MRR. */
const firstPaid = new Map<string, number>();
const owned = new Map<string, Set<string>>(); // customer → purchases in force (one-time included)
const snapshots: Array<{ at: number; mrr: Map<string, number>; active: number }> = [];

function pay(customer: string, at: number, parts: Array<[Money['kind'], number]>) {
  for (const [kind, amount] of parts) if (amount !== 0) money.push({ at, customer, amount, kind });
  const received = parts.filter(([kind]) => kind !== 'refund' && kind !== 'dispute');
  const amount = received.reduce((sum, [, a]) => sum + a, 0);
  if (amount > 0) payments.push({ at, customer, amount });
}
const total = (parts: Array<[Money['kind'], number]>) => parts.reduce((s, [, a]) => s + a, 0);

function referenceMrr(): Map<string, number> {
  const sums = new Map<string, [bigint, bigint]>();
  for (const s of subs) {
    if (s.ended || s.trialing || s.plan.price === 0) continue;
    const [n, d] = monthly(s.plan);
    const [sn, sd] = sums.get(s.customer) ?? [0n, 1n];
    sums.set(s.customer, [sn * d + n * sd, sd * d]);
  }
  return new Map([...sums].map(([c, [n, d]]) => [c, halfEven(n, d)]));
}
const activeCount = () => [...owned.values()].filter((set) => set.size > 0).length;

// ---- Driving the service --------------------------------------------------------------

const planIds = new Map<string, string>();

const customerIds = new Map<string, string>();

/** The customer, made with a card on file the first time it is named. */
async function customerOf(name: string): Promise<string> {
  const known = customerIds.get(name);
  if (known !== undefined) return known;
  const ref = (await sandbox('POST', '/v1/sdk/customers', { externalRef: name })).body.reference as string;
  const card = await sandbox('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
    card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
  });
  expect(card.status).toBe(201);
  customerIds.set(name, ref);
  return ref;
}

async function subscribe(customer: string, key: string, at: number) {
  const p = plan(key);
  await customerOf(customer);
  const body = (
    await sandbox('POST', '/v1/sdk/activate', {
      customerRef: await customerOf(customer),
      planRef: planIds.get(key),
    })
  ).body;
  expect(body.status, `${customer} ${key}: ${body.message}`).toBe('activated');
  const ref = body.purchaseRef as string;
  const set = owned.get(customer) ?? new Set();
  set.add(ref);
  owned.set(customer, set);
  if (p.type === 'one-time') {
    pay(customer, at, [['oneTime', p.price]]);
    return;
  }
  const trial = (p.trialDays ?? 0) > 0;
  const anchor = trial ? at + (p.trialDays as number) * DAY : at;
  const sub: Sub = {
    customer,
    plan: p,
    purchaseRef: ref,
    anchor,
    periodStart: at,
    periodEnd: trial ? anchor : boundaryAfter(p, anchor, at),
    trialing: trial,
    cancelAtEnd: false,
    ended: false,
    lastPayment: 0,
  };
  subs.push(sub);
  if (!trial && p.price > 0) {
    const parts: Array<[Money['kind'], number]> = [
      ['recurring', p.price],
      ['oneTime', p.setupFee ?? 0],
    ];
    pay(customer, at, parts);
    sub.lastPayment = total(parts);
  }
}

const liveSub = (customer: string, product: string) =>
  subs.find((s) => s.customer === customer && s.plan.product === product && !s.ended) as Sub;

function end(sub: Sub) {
  sub.ended = true;
  owned.get(sub.customer)?.delete(sub.purchaseRef);
}

/** The plan switch's credit for unused paid time, and where it went. */
async function switchPlan(customer: string, key: string, at: number) {
  const old = liveSub(customer, plan(key).product);
  const credit = old.trialing
    ? 0
    : halfEven(BigInt(old.plan.price) * BigInt(old.periodEnd - at), BigInt(old.periodEnd - old.periodStart));
  end(old);
  const body = (
    await sandbox('POST', '/v1/sdk/activate', {
      customerRef: await customerOf(customer),
      planRef: planIds.get(key),
    })
  ).body;
  expect(body.status).toBe('activated');
  expect(body.proration?.credit ?? 0).toBe(credit);
  const p = plan(key);
  owned.get(customer)?.add(body.purchaseRef);
  const sub: Sub = {
    customer,
    plan: p,
    purchaseRef: body.purchaseRef,
    anchor: at,
    periodStart: at,
    periodEnd: boundaryAfter(p, at, at),
    trialing: false,
    cancelAtEnd: false,
    ended: false,
    lastPayment: Math.max(0, p.price - credit),
  };
  subs.push(sub);
  // The new base price and the credit are both recurring revenue; an excess goes back.
  if (credit <= p.price)
    pay(customer, at, [
      ['recurring', p.price],
      ['recurring', -credit],
    ]);
  else pay(customer, at, [['refund', credit - p.price]]);
}

async function lastPaymentOf(customer: string): Promise<string> {
  const ref = await customerOf(customer);
  const list = (await sandbox('GET', `/v1/ui/transactions?type=payment&customerRef=${ref}&limit=100`)).body
    .data as Json[];
  return (list[list.length - 1] as Json).id;
}

/** Renewals and trial conversions the scheduler made at `at`, as the test expects them. */
function renewAll(at: number) {
  for (const sub of subs) {
    if (sub.ended || sub.periodEnd !== at) continue;
    if (sub.cancelAtEnd) {
      end(sub);
      continue;
    }
    sub.trialing = false;
    sub.periodStart = at;
    sub.periodEnd = boundaryAfter(sub.plan, sub.anchor, at);
    if (sub.plan.price > 0) {
      pay(sub.customer, at, [['recurring', sub.plan.price]]);
      sub.lastPayment = sub.plan.price;
    }
  }
}

type Action = { day: number; run: (at: number) => Promise<void> };
const actions: Action[] = [];

/** 28 customers, two of each story, on generated days. */
function generate() {
  const next = random(63);
  const pick = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  // A day whose date is at most the 28th, so monthly anchors never clamp.
  const day = (lo: number, hi: number) => {
    const d = pick(lo, hi);
    return new Date(START + d * DAY).getUTCDate() > 28 ? d + 4 : d;
  };
  const stories: Record<string, (c: string) => void> = {
    steady: (c) => {
      const key = ['basic', 'pro', 'annual', 'weekly', 'quarterly'][pick(0, 4)] as string;
      actions.push({ day: day(0, 120), run: (at) => subscribe(c, key, at) });
    },
    churnAtEnd: (c) => {
      const s = day(0, 60);
      actions.push({ day: s, run: (at) => subscribe(c, 'basic', at) });
      actions.push({
        day: s + pick(3, 70),
        run: async () => {
          const sub = liveSub(c, 'agents');
          if (sub === undefined) return;
          expect(
            (await sandbox('POST', `/v1/sdk/purchases/${sub.purchaseRef}/cancel`, { atPeriodEnd: true }))
              .status,
          ).toBe(200);
          sub.cancelAtEnd = true;
        },
      });
    },
    churnNow: (c) => {
      const s = day(0, 90);
      actions.push({ day: s, run: (at) => subscribe(c, 'weekly', at) });
      actions.push({
        day: s + pick(3, 50),
        run: async () => {
          const sub = liveSub(c, 'search');
          expect((await sandbox('POST', `/v1/sdk/purchases/${sub.purchaseRef}/cancel`, {})).status).toBe(200);
          end(sub);
        },
      });
    },
    upgrade: (c) => {
      const s = day(0, 90);
      actions.push({ day: s, run: (at) => subscribe(c, 'basic', at) });
      actions.push({ day: s + pick(5, 60), run: (at) => switchPlan(c, 'pro', at) });
    },
    downgrade: (c) => {
      const s = day(0, 90);
      actions.push({ day: s, run: (at) => subscribe(c, 'pro', at) });
      actions.push({ day: s + pick(2, 60), run: (at) => switchPlan(c, 'basic', at) });
    },
    annualDown: (c) => {
      const s = day(0, 60);
      actions.push({ day: s, run: (at) => subscribe(c, 'annual', at) });
      actions.push({ day: s + pick(20, 90), run: (at) => switchPlan(c, 'basic', at) });
    },
    comeback: (c) => {
      const s = day(0, 50);
      const stop = s + pick(5, 25);
      actions.push({ day: s, run: (at) => subscribe(c, 'basic', at) });
      actions.push({
        day: stop,
        run: async () => {
          const sub = liveSub(c, 'agents');
          expect((await sandbox('POST', `/v1/sdk/purchases/${sub.purchaseRef}/cancel`, {})).status).toBe(200);
          end(sub);
        },
      });
      actions.push({ day: day(stop + 35, stop + 70), run: (at) => subscribe(c, 'basic', at) });
    },
    trial: (c) => {
      actions.push({ day: day(0, 140), run: (at) => subscribe(c, 'trial', at) });
    },
    setup: (c) => {
      actions.push({ day: day(0, 140), run: (at) => subscribe(c, 'setup', at) });
    },
    refunded: (c) => {
      const s = day(0, 120);
      actions.push({ day: s, run: (at) => subscribe(c, 'basic', at) });
      actions.push({
        day: s + pick(1, 25),
        run: async (at) => {
          const sub = liveSub(c, 'agents');
          const txn = await lastPaymentOf(c);
          const refund = await sandbox('POST', '/v1/ui/transactions/refunds', { originalTransactionId: txn });
          expect(refund.status).toBe(202);
          pay(c, at, [['refund', sub.lastPayment]]);
          end(sub);
        },
      });
    },
    refundAndDispute: (c) => {
      const s = day(0, 100);
      actions.push({ day: s, run: (at) => subscribe(c, 'quarterly', at) });
      actions.push({
        day: s + pick(1, 20),
        run: async (at) => {
          const txn = await lastPaymentOf(c);
          const refund = await sandbox('POST', '/v1/ui/transactions/refunds', {
            originalTransactionId: txn,
            refundAmount: 1000,
          });
          expect(refund.status).toBe(202);
          pay(c, at, [['refund', 1000]]);
          const dispute = await sandbox('POST', '/v1/sdk/sandbox/disputes', {
            transactionId: txn,
            amount: 500,
          });
          expect(dispute.status).toBe(201);
          const lost = await sandbox('POST', `/v1/sdk/sandbox/disputes/${dispute.body.id}/close`, {
            outcome: 'lost',
          });
          expect(lost.status).toBe(200);
          pay(c, at, [['dispute', 500]]);
        },
      });
    },
    onceAndCredits: (c) => {
      const s = day(0, 120);
      actions.push({ day: s, run: (at) => subscribe(c, 'once', at) });
      actions.push({
        day: s + pick(0, 40),
        run: async (at) => {
          const session = await sandbox('POST', '/v1/sdk/checkout-sessions', {
            customerRef: await customerOf(c),
            topup: { credits: 300, amount: 2500 },
          });
          expect(session.status).toBe(201);
          const paid = await harness.controlPlane.app.inject({
            method: 'POST',
            url: `/checkout/${session.body.id}/pay`,
            payload: { card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' } },
          });
          expect(paid.statusCode).toBe(200);
          pay(c, at, [['credits', 2500]]);
        },
      });
    },
    free: (c) => {
      actions.push({ day: day(0, 140), run: (at) => subscribe(c, 'free', at) });
    },
    twoProducts: (c) => {
      const s = day(0, 100);
      actions.push({ day: s, run: (at) => subscribe(c, 'weekly', at) });
      actions.push({ day: s + pick(1, 40), run: (at) => subscribe(c, 'quarterly', at) });
    },
  };
  for (const [name, story] of Object.entries(stories)) {
    story(`${name}-1`);
    story(`${name}-2`);
  }
}

const monthOf = (t: number) => new Date(t).toISOString().slice(0, 7);
const MONTHS = ['2026-01', '2026-02', '2026-03', '2026-04', '2026-05', '2026-06'];

describe('revenue analytics', () => {
  it('walks five and a half months of generated business with the scheduler running', async () => {
    for (const p of PLANS) {
      let product = planIds.get(`product:${p.product}`);
      if (product === undefined) {
        product = (await sandbox('POST', '/v1/ui/products', { name: p.product })).body.id as string;
        planIds.set(`product:${p.product}`, product);
      }
      const created = await sandbox('POST', `/v1/ui/products/${product}/plans`, {
        name: p.key,
        type: p.type,
        price: p.price,
        ...(p.cycle === undefined ? {} : { billingCycle: p.cycle }),
        ...(p.setupFee === undefined ? {} : { setupFee: p.setupFee }),
        ...(p.trialDays === undefined ? {} : { trialDays: p.trialDays }),
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      planIds.set(p.key, created.body.id);
    }
    generate();
    for (let d = 0; d <= LAST_DAY; d++) {
      const at = START + d * DAY;
      // Midnight of a month's first day falls between yesterday's work and today's.
      if (new Date(at).getUTCDate() === 1)
        snapshots.push({ at: at - 10 * 3_600_000, mrr: referenceMrr(), active: activeCount() });
      clock.set(new Date(at));
      await harness.controlPlane.scheduler.runDue();
      renewAll(at);
      for (const action of actions.filter((a) => a.day === d)) await action.run(at);
      for (const customer of referenceMrr().keys()) if (!firstPaid.has(customer)) firstPaid.set(customer, at);
    }
    snapshots.push({ at: START + LAST_DAY * DAY, mrr: referenceMrr(), active: activeCount() });
  }, 120_000);

  it('answers every month to the cent as the test worked it out', async () => {
    const answer = await sandbox('GET', '/v1/ui/analytics/revenue?from=2026-01&to=2026-06');
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    const report = answer.body;
    if (process.env.SHOW_REVENUE) console.log(JSON.stringify(report.months, null, 1));
    expect(report).toMatchObject({ from: '2026-01', to: '2026-06', timeZone: 'UTC', currency: 'usd' });
    expect(report.months.map((m: Json) => m.month)).toEqual(MONTHS);
    const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    const bps = (a: number, b: number) => (b === 0 ? null : halfEven(BigInt(a) * 10_000n, BigInt(b)));
    const seen = { new: 0, expansion: 0, contraction: 0, churn: 0, reactivation: 0 };
    MONTHS.forEach((label, i) => {
      const before = (snapshots[i] as (typeof snapshots)[number]).mrr;
      const after = (snapshots[i + 1] as (typeof snapshots)[number]).mrr;
      const start = Date.parse(`${label}-01T00:00:00Z`);
      const move = { new: 0, expansion: 0, contraction: 0, churn: 0, reactivation: 0 };
      const count = { new: 0, reactivated: 0, churned: 0 };
      for (const [c, now] of after) {
        const was = before.get(c) ?? 0;
        if (was === 0 && (firstPaid.get(c) as number) < start) {
          move.reactivation += now;
          count.reactivated++;
        } else if (was === 0) {
          move.new += now;
          count.new++;
        } else if (now > was) move.expansion += now - was;
        else move.contraction += was - now;
      }
      for (const [c, was] of before)
        if (!after.has(c)) {
          move.churn += was;
          count.churned++;
        }
      for (const k of Object.keys(seen) as Array<keyof typeof seen>) seen[k] += move[k];

      const inMonth = (t: number) => monthOf(t) === label;
      const of = (kind: Money['kind']) =>
        money.filter((x) => x.kind === kind && inMonth(x.at)).reduce((a, x) => a + x.amount, 0);
      const paid = payments.filter((x) => inMonth(x.at));
      // 2.9 % of each payment, half to even, plus 30¢.
      const fees = paid.reduce((a, x) => a + halfEven(BigInt(x.amount) * 290n, 10_000n) + 30, 0);
      const gross = of('recurring') + of('oneTime') + of('credits');
      const net = gross - of('refund') - of('dispute') - fees;
      const payers = new Set(paid.map((x) => x.customer)).size;
      const month = report.months[i] as Json;
      expect(month, label).toEqual({
        month: label,
        start: new Date(start).toISOString(),
        end: `${MONTHS[i + 1] ?? '2026-07'}-01T00:00:00.000Z`,
        mrr: {
          start: sum(before),
          end: sum(after),
          ...move,
          arpu: after.size === 0 ? null : halfEven(BigInt(sum(after)), BigInt(after.size)),
        },
        customers: {
          active: (snapshots[i + 1] as (typeof snapshots)[number]).active,
          paying: after.size,
          ...count,
        },
        churnRate: {
          customersBasisPoints: bps(count.churned, before.size),
          mrrBasisPoints: bps(move.churn, sum(before)),
        },
        revenue: {
          recurring: of('recurring'),
          usage: 0,
          oneTime: of('oneTime'),
          credits: of('credits'),
          other: 0,
          gross,
          refunds: of('refund'),
          disputes: of('dispute'),
          platformFees: fees,
          net,
          customersPaying: payers,
          perPayingCustomer: payers === 0 ? null : halfEven(BigInt(net), BigInt(payers)),
        },
      });
    });
    // The story generator reached every kind of movement, so none of them is checked as zero only.
    for (const [kind, amount] of Object.entries(seen)) expect(amount, kind).toBeGreaterThan(0);
    expect(money.some((x) => x.kind === 'refund')).toBe(true);
  });

  it('matches the P&L month by month, and Paris months hold the same days here', async () => {
    const report = (await sandbox('GET', '/v1/ui/analytics/revenue?from=2026-01&to=2026-06')).body;
    const pnl = (await sandbox('GET', '/v1/ui/financials/pnl?period=this-year')).body;
    report.months.forEach((m: Json) => {
      const p = (pnl.monthly as Json[]).find((x) => x.month === m.month)?.revenue as Json;
      expect(
        [m.revenue.gross, m.revenue.refunds, m.revenue.disputes, m.revenue.platformFees, m.revenue.net],
        m.month,
      ).toEqual([p.grossRevenue, p.refunds, p.disputes, p.platformFees, p.netRevenue]);
    });
    // Everything here happens at 10:00 UTC, inside the same Paris day: only the instants move.
    const paris = (
      await sandbox('GET', '/v1/ui/analytics/revenue?from=2026-01&to=2026-06&timeZone=Europe/Paris')
    ).body;
    expect(paris.months[2].start).toBe('2026-02-28T23:00:00.000Z');
    expect(paris.months[3].start).toBe('2026-03-31T22:00:00.000Z');
    expect(paris.months.map((m: Json) => [m.mrr, m.customers, m.revenue])).toEqual(
      report.months.map((m: Json) => [m.mrr, m.customers, m.revenue]),
    );
  });

  it('keeps sandbox and live apart', async () => {
    const product = (await live('POST', '/v1/ui/products', { name: 'Live only' })).body.id;
    const free = (
      await live('POST', `/v1/ui/products/${product}/plans`, {
        name: 'Free',
        type: 'recurring',
        price: 0,
        billingCycle: 'monthly',
      })
    ).body.id;
    const customer = (await live('POST', '/v1/sdk/customers', { externalRef: 'live-one' })).body.reference;
    expect(
      (await live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: free })).body.status,
    ).toBe('activated');
    const liveReport = (await live('GET', '/v1/ui/analytics/revenue?from=2026-06&to=2026-06')).body;
    expect(liveReport.months[0]).toMatchObject({
      mrr: { start: 0, end: 0 },
      customers: { active: 1, paying: 0 },
      revenue: { gross: 0, net: 0, customersPaying: 0 },
    });
    const sandboxJune = (await sandbox('GET', '/v1/ui/analytics/revenue?from=2026-06&to=2026-06')).body
      .months[0];
    expect(sandboxJune.customers.active).toBe(
      (snapshots[snapshots.length - 1] as (typeof snapshots)[number]).active,
    );
  });

  it("migration 039's backfill names each revenue entry as the ledger now writes it", async () => {
    const written = async () =>
      (
        await harness.pool.query<{ id: string; revenue_line: string | null }>(
          `SELECT id, revenue_line FROM ledger_entries WHERE account = 'revenue' ORDER BY id`,
        )
      ).rows;
    const before = await written();
    expect(new Set(before.map((r) => r.revenue_line))).toEqual(
      new Set(['base', 'setup_fee', 'proration', 'top_up']),
    );
    // The migration's own statements, run again over entries whose line was forgotten.
    const sql = readFileSync(join(import.meta.dirname, '../src/db/migrations/039_revenue_lines.sql'), 'utf8');
    const backfill = sql.slice(sql.indexOf('ALTER TABLE ledger_entries DISABLE TRIGGER'));
    const client = await harness.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only;
         UPDATE ledger_entries SET revenue_line = NULL;
         ALTER TABLE ledger_entries ENABLE TRIGGER ledger_append_only;`,
      );
      await client.query(backfill);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await written()).toEqual(before);
  });

  it('refuses what it cannot answer, by name', async () => {
    const bad = async (query: string) => (await sandbox('GET', `/v1/ui/analytics/revenue?${query}`)).body;
    expect(await bad('from=2010-01&to=2026-06')).toMatchObject({
      code: 'range_too_large',
      limit: 120,
      grain: 'month',
    });
    expect((await bad('from=2026-13')).errors[0]).toMatchObject({ path: '/from' });
    expect((await bad('from=2026-06&to=2026-01')).errors[0]).toMatchObject({ path: '/from' });
    expect((await bad('timeZone=Mars/Olympus')).errors[0]).toMatchObject({ path: '/timeZone' });
    expect((await bad('currency=dollars')).code).toBe('validation_failed');
    expect((await bad('period=month')).code).toBe('validation_failed');
  });
});
