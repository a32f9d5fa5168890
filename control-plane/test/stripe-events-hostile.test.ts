import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import { connect, eventMaker, type Json, liveSeller, payingCustomer } from '../../test/helpers/stripe-seller';
import { MovableClock } from '../src/clock';

/**
 * Stripe's signed events, made hostile (docs/payments.md): a signature proves who sent an event,
 * not that its object has the fields each handler reads with sane values. Every event type the
 * endpoint acts on is sent with each field of stripe-mock's fixture replaced in turn by null, a
 * number, a negative or huge one, a 100 kB string, an object, a list and text with a NUL and an
 * emoji; our own metadata keys likewise; and envelopes without a type, data or object. Each is
 * answered 200 with an outcome or a 4xx with a machine code, never a 5xx, and no refund, dispute
 * or charge moves the seller's live ledger.
 */
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));
let fixtures: Record<string, Json> = {};
const event = eventMaker(clock, () => fixtures);

/** Each handled type, and the fixture its object is made from. */
const HANDLED: ReadonlyArray<[string, string]> = [
  ['checkout.session.completed', 'checkout.session'],
  ['refund.updated', 'refund'],
  ['charge.refunded', 'charge'],
  ['charge.dispute.created', 'dispute'],
  ['charge.dispute.closed', 'dispute'],
  ['payout.paid', 'payout'],
  ['payment_intent.succeeded', 'payment_intent'],
  ['payment_intent.payment_failed', 'payment_intent'],
  ['customer.tax_id.updated', 'tax_id'],
];

const HOSTILE: readonly unknown[] = [null, 42, -1, 1e300, 'x'.repeat(100_000), {}, [], 'a\u0000b 😀'];

/** The metadata keys our handlers read (charges, refunds, checkout sessions). */
const OUR_KEYS = [
  'charge_key',
  'charge_attempt',
  'customer',
  'payment',
  'purchase',
  'refund_source',
  'refund_reason',
  'refund_key',
  'early_end',
  'prorated_at',
  'checkout_session',
  'provider',
];

describe('hostile signed Stripe events', () => {
  let harness: TestControlPlane;
  let mock: StripeMock;

  beforeAll(async () => {
    mock = await startStripeMock({ payments: 'succeed' });
    fixtures = mock.fixtures;
    harness = await startTestControlPlane({ bodyLimitBytes: 4 * 1024 * 1024, clock, stripeApiUrl: mock.url });
  }, 600_000);
  afterAll(async () => {
    await harness?.close();
    await mock?.close();
  });

  it('answers every one with an outcome or a 4xx, never a 5xx, and moves no money of ours', async () => {
    const s = await liveSeller(harness, 'Hostile Events Co');
    await connect(s);
    await payingCustomer(s);
    const ledger = async () =>
      (
        await harness.pool.query<{ kind: string; account: string; amount: string }>(
          'SELECT kind, account, amount FROM ledger_entries WHERE provider_id = $1 ORDER BY transaction_id, account',
          [s.provider.id],
        )
      ).rows.map((r) => `${r.kind} ${r.account} ${r.amount}`);
    const before = await ledger();
    const failures: string[] = [];
    const send = async (what: string, body: Json) => {
      const answer = await s.post(body);
      if (answer.status >= 500 || (answer.status >= 400 && typeof answer.body.code !== 'string'))
        failures.push(`${what}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
    };
    let sent = 0;
    for (const [type, resource] of HANDLED) {
      const fixture = fixtures[resource] as Json;
      expect(fixture, resource).toBeDefined();
      for (const field of Object.keys(fixture))
        for (const value of HOSTILE) {
          await send(
            `${type} ${field}=${JSON.stringify(value).slice(0, 20)}`,
            event(type, resource, { [field]: value }),
          );
          sent++;
        }
      for (const key of OUR_KEYS)
        for (const value of [...HOSTILE, 'pay_nothing', '2026-06-01T09:00:00.000Z', 'request', 'proration']) {
          await send(
            `${type} metadata.${key}=${JSON.stringify(value).slice(0, 20)}`,
            event(type, resource, { metadata: { ...(fixture.metadata ?? {}), [key]: value } }),
          );
          sent++;
        }
      // The envelope itself.
      const whole = event(type, resource, {});
      for (const [what, envelope] of [
        ['no data', { ...whole, data: undefined }],
        ['null data', { ...whole, data: null }],
        ['object a string', { ...whole, data: { object: 'x' } }],
        ['object a list', { ...whole, data: { object: [] } }],
        ['no id', { ...whole, id: undefined }],
        ['created a string', { ...whole, created: 'yesterday' }],
        ['created negative', { ...whole, created: -1 }],
        ['created huge', { ...whole, created: 1e300 }],
        ['created past any date', { ...whole, created: 2 ** 52 }],
      ] as const) {
        await send(`${type} ${what}`, envelope as Json);
        sent++;
      }
    }
    for (const type of [null, 42, {}, ['charge.refunded'], '']) {
      await send(`type ${JSON.stringify(type)}`, { ...event('charge.refunded', 'charge', {}), type });
      sent++;
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(1000);
    // No refund, dispute or charge of ours among them: beside what the customer's payment wrote,
    // the ledger holds only the account's payout, recorded as a payout event says (once, at the
    // amount of its first well-formed event: later ones of the same payout move its status).
    expect(await ledger()).toEqual([...before, 'payout bank 42', 'payout processor_balance -42']);
  }, 600_000);
});
