import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import { activatedPurchase, liveSeller } from '../../test/helpers/stripe-seller';
import { Ledger } from '../src/modules/ledger/service';
import { SANDBOX_CARDS, SandboxProcessor } from '../src/modules/payments/processor';

/**
 * A refund asked with an Idempotency-Key (refunder.ts): the processor is asked with a key made of
 * it and the payment, so a retry after a failure that came after the processor refunded gets
 * that same refund back, never a second one. On real PostgreSQL, with the sandbox processor
 * (which answers a key it has seen with the same refund, as Stripe does) and with stripe-mock
 * behind its recording relay (what key reached Stripe).
 */
let harness: TestControlPlane;
let mock: StripeMock;
beforeAll(async () => {
  // Sandbox providers use the sandbox processor; live ones with Stripe connected, stripe-mock.
  mock = await startStripeMock({ payments: 'succeed', refunds: 'pending' });
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, stripeApiUrl: mock.url });
}, 600_000);
afterAll(async () => {
  await harness?.close();
  await mock?.close();
});
afterEach(() => vi.restoreAllMocks());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

/** A provider's customer with a paid monthly plan of 1000: its API and the payment's reference. */
async function paidPurchase() {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Refunds' });
  const api = async (url: string, body: unknown, idempotencyKey?: string) => {
    const response = await harness.controlPlane.app.inject({
      method: 'POST',
      url,
      headers: {
        authorization: `Bearer ${sandboxKey}`,
        ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
      },
      payload: body as object,
    });
    return { status: response.statusCode, body: response.json() as Json, headers: response.headers };
  };
  const product = (await api('/v1/ui/products', { name: 'Weather' })).body;
  const plan = (
    await api(`/v1/ui/products/${product.id}/plans`, { name: 'Pro', type: 'recurring', price: 1000 })
  ).body;
  const customer = (await api('/v1/sdk/customers', {})).body.reference as string;
  const card = { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' };
  expect((await api(`/v1/sdk/customers/${customer}/payment-methods`, { card })).status).toBe(201);
  const purchase = (await api('/v1/sdk/activate', { customerRef: customer, planRef: plan.id })).body
    .purchaseRef as string;
  const { rows } = await harness.pool.query<{ id: string; transaction_reference: string }>(
    'SELECT id, transaction_reference FROM payments WHERE purchase_id = $1',
    [purchase],
  );
  const payment = rows[0] as { id: string; transaction_reference: string };
  const refund = (body: Json, key?: string) => api('/v1/ui/transactions/refunds', body, key);
  const refunds = async () =>
    (
      await harness.pool.query<Json>(
        'SELECT id, amount::int AS amount, processor_refund FROM refunds WHERE payment_id = $1 ORDER BY created_at, id',
        [payment.id],
      )
    ).rows;
  const refundMovements = async () =>
    (
      await harness.pool.query<{ n: number }>(
        "SELECT count(DISTINCT transaction_id)::int AS n FROM ledger_entries WHERE provider_id = $1 AND kind = 'refund'",
        [provider.id],
      )
    ).rows[0]?.n;
  return { provider, payment, refund, refunds, refundMovements };
}

describe('a refund retried under its Idempotency-Key', () => {
  it('gets the processor’s first refund back after a failure that came after it, and records it once', async () => {
    const { provider, payment, refund, refunds, refundMovements } = await paidPurchase();
    const asked = vi.spyOn(SandboxProcessor.prototype, 'refund');
    const body = { originalTransactionId: payment.transaction_reference, refundAmount: 300 };
    // The processor refunds; the transaction that records it fails after.
    vi.spyOn(Ledger.prototype, 'recordRefund').mockRejectedValueOnce(new Error('commit lost'));
    expect((await refund(body, 'refund-300')).status).toBe(500);
    expect(await refunds()).toEqual([]);

    const retried = await refund(body, 'refund-300');
    expect(retried.status).toBe(202);
    const keys = asked.mock.calls.map(([r]) => r.idempotencyKey);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect(keys[0]).toMatch(new RegExp(`^${payment.id}:[A-Za-z0-9_-]{43}$`));
    const [made] = await refunds();
    expect(await refunds()).toEqual([
      { id: retried.body.id, amount: 300, processor_refund: `re_sandbox_${keys[0]}` },
    ]);
    expect(await refundMovements()).toBe(1);

    // The stored answer replays while it is kept; once it is gone, the processor answers the key
    // with the refund we hold, and nothing is recorded twice.
    const replayed = await refund(body, 'refund-300');
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body.id).toBe(made?.id);
    await harness.pool.query('DELETE FROM idempotency_keys WHERE provider_id = $1', [provider.id]);
    const late = await refund(body, 'refund-300');
    expect(late.body).toMatchObject({ status: 409, code: 'refund_already_made', refund: made?.id });
    expect(await refunds()).toHaveLength(1);
    expect(await refundMovements()).toBe(1);

    // Another key is another refund, and so is each request without one (as at Stripe).
    expect((await refund(body, 'refund-300-again')).status).toBe(202);
    expect((await refund({ ...body, refundAmount: 100 })).status).toBe(202);
    expect((await refund({ ...body, refundAmount: 100 })).status).toBe(202);
    const after = await refunds();
    expect(after.map((r) => r.amount)).toEqual([300, 300, 100, 100]);
    expect(new Set(after.map((r) => r.processor_refund)).size).toBe(4);
    expect(await refundMovements()).toBe(4);
  });

  it('makes one refund when the same request comes many times at once', async () => {
    const { payment, refund, refunds, refundMovements } = await paidPurchase();
    const body = { originalTransactionId: payment.transaction_reference, refundAmount: 250 };
    const answers = await Promise.all(Array.from({ length: 8 }, () => refund(body, 'burst')));
    const made = answers.filter((a) => a.status === 202);
    expect(made.length).toBeGreaterThanOrEqual(1);
    // The rest wait out the first (409 while it runs) or replay its answer: one refund either way.
    for (const a of answers)
      if (a.status !== 202) expect(a.body.code).toBe('idempotency_request_in_progress');
    expect(new Set(made.map((a) => a.body.id)).size).toBe(1);
    expect(await refunds()).toHaveLength(1);
    expect(await refundMovements()).toBe(1);
  });
});

describe('a refund retried under its Idempotency-Key, through Stripe', () => {
  it('asks Stripe with the same key on the retry, so Stripe answers it with the first refund', async () => {
    const s = await liveSeller(harness, 'Refund retried');
    const { payment } = await activatedPurchase(harness, s);
    const refund = () =>
      harness.controlPlane.app.inject({
        method: 'POST',
        url: '/v1/ui/transactions/refunds',
        headers: { authorization: `Bearer ${s.liveKey}`, 'idempotency-key': 'refund-400' },
        payload: { originalTransactionId: payment, refundAmount: 400 },
      });
    const from = mock.requests.length;
    vi.spyOn(Ledger.prototype, 'recordRefund').mockRejectedValueOnce(new Error('commit lost'));
    expect((await refund()).statusCode).toBe(500);
    expect((await refund()).statusCode).toBe(202);
    const sent = mock.requests.slice(from).filter((r) => r.path === '/v1/refunds');
    expect(sent).toEqual([
      expect.objectContaining({ status: 200, idempotencyKey: expect.stringMatching(`^refund:${payment}:`) }),
      expect.objectContaining({ status: 200, idempotencyKey: sent[0]?.idempotencyKey }),
    ]);
    expect(
      (await harness.pool.query('SELECT amount::int AS amount FROM refunds WHERE payment_id = $1', [payment]))
        .rows,
    ).toEqual([{ amount: 400 }]);
  });
});
