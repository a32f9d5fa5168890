import { describe, expect, it } from 'vitest';
import { type Movement, movementOf, reconcile } from '../src/modules/processors/reconciliation';

const window = { from: new Date('2026-06-01T00:00:00Z'), to: new Date('2026-06-02T00:00:00Z') };
const m = (kind: Movement['kind'], stripeId: string, amount: number, ref = 'x'): Movement => ({
  kind,
  stripeId,
  amount,
  currency: 'usd',
  ref,
});

describe('reconcile', () => {
  it('matches each movement once by kind and Stripe object, and reports every leftover as it is', () => {
    const ours = [
      m('payment', 'pi_1', 1000, 'pay_1'),
      m('payment', 'pi_2', 500, 'pay_2'),
      m('refund', 're_1', -200, 're_ours'),
      m('payout', 'po_1', -700, 'po_ours'),
      m('dispute', 'du_1', -500, 'dp_1'),
    ];
    const stripe = [
      m('payment', 'pi_1', 1000, 'txn_a'),
      m('refund', 're_1', -200, 'txn_b'),
      m('payout', 'po_1', -650, 'txn_c'),
      m('dispute', 'du_1', -500, 'txn_d'),
      m('payment', 'pi_9', 300, 'txn_e'),
    ];
    const report = reconcile(window, ours, stripe, { usd: 59 });
    expect(report).toMatchObject({
      from: '2026-06-01T00:00:00.000Z',
      to: '2026-06-02T00:00:00.000Z',
      matched: 3,
      missingAtStripe: [ours[1]],
      missingHere: [stripe[4]],
      amountMismatches: [{ ours: ours[3], stripe: stripe[2] }],
      stripeFees: { usd: 59 },
      balanced: false,
    });
  });

  it('pairs repeated movements of one object one for one (two partial refunds), and balances', () => {
    const ours = [m('refund', 're_1', -100), m('refund', 're_1', -100)];
    expect(reconcile(window, ours, [m('refund', 're_1', -100), m('refund', 're_1', -100)], {})).toMatchObject(
      {
        matched: 2,
        balanced: true,
      },
    );
    expect(reconcile(window, ours, [m('refund', 're_1', -100)], {}).missingAtStripe).toHaveLength(1);
  });

  it('a currency that differs is a mismatch, not a match', () => {
    const report = reconcile(
      window,
      [m('payment', 'pi_1', 100)],
      [{ ...m('payment', 'pi_1', 100), currency: 'eur' }],
      {},
    );
    expect(report.amountMismatches).toHaveLength(1);
    expect(report.balanced).toBe(false);
  });
});

describe('movementOf', () => {
  const bt = (type: string, source: unknown, amount = 100) =>
    movementOf({ id: 'txn_1', type, amount, fee: 3, currency: 'usd', source: source as never });

  it("reads Stripe's balance transactions in our terms", () => {
    expect(bt('charge', { id: 'ch_1', object: 'charge', payment_intent: 'pi_1' })).toEqual({
      kind: 'payment',
      stripeId: 'pi_1',
      amount: 100,
      currency: 'usd',
      ref: 'txn_1',
    });
    expect(bt('payment', { id: 'py_1', payment_intent: { id: 'pi_2' } })?.stripeId).toBe('pi_2');
    expect(bt('charge', 'ch_1')?.stripeId).toBe('ch_1');
    expect(bt('refund', { id: 're_1' }, -40)).toMatchObject({
      kind: 'refund',
      stripeId: 're_1',
      amount: -40,
    });
    expect(bt('refund_failure', 're_1')?.kind).toBe('refund_reversal');
    expect(bt('adjustment', { id: 'du_1' }, -100)?.kind).toBe('dispute');
    expect(bt('adjustment', { id: 'du_1' }, 100)?.kind).toBe('dispute_reversal');
    expect(bt('adjustment', { id: 'adj_1' })).toBeUndefined();
    expect(bt('payout', 'po_1', -100)).toMatchObject({ kind: 'payout', stripeId: 'po_1' });
    expect(bt('payout_failure', 'po_1')?.kind).toBe('payout_reversal');
    expect(bt('stripe_fee', null)).toBeUndefined();
  });
});
