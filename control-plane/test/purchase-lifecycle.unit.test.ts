import { describe, expect, it } from 'vitest';
import { addMonths, periodEnd } from '../src/modules/purchases/periods';
import {
  MOVES,
  type MoveName,
  PURCHASE_STATUSES,
  type PurchaseStatus,
  TransitionError,
  transition,
} from '../src/modules/purchases/state-machine';

const at = (status: PurchaseStatus, cancelAtPeriodEnd = false) => ({ status, cancelAtPeriodEnd });

describe('purchase state machine', () => {
  it.each([
    [null, 'start_active', 'active', ['purchase.created', 'purchase.activated']],
    [null, 'start_trial', 'trialing', ['purchase.created']],
    [null, 'start_pending', 'pending', ['purchase.created']],
    [at('pending'), 'first_payment_succeeded', 'active', ['purchase.activated']],
    [at('trialing'), 'trial_ending_soon', 'trialing', ['purchase.trial_ending']],
    [at('trialing'), 'trial_converted', 'active', ['purchase.trial_converted', 'purchase.activated']],
    [at('trialing'), 'trial_ended_unpaid', 'suspended', ['purchase.suspended']],
    [at('active'), 'renewal_reminder', 'active', ['purchase.renewal_reminder']],
    [at('active'), 'renewed', 'active', ['purchase.renewed']],
    [at('past_due'), 'renewed', 'active', ['purchase.renewed']],
    [at('active'), 'renewal_failed', 'past_due', ['purchase.past_due']],
    [at('past_due'), 'dunning_retry_failed', 'past_due', ['purchase.past_due']],
    [at('past_due'), 'dunning_exhausted', 'cancelled', ['purchase.cancelled']],
    [at('active'), 'schedule_cancellation', 'active', ['purchase.cancellation_scheduled']],
    [at('active', true), 'reactivate', 'active', ['purchase.reactivated']],
    [at('trialing'), 'cancel_now', 'cancelled', ['purchase.cancelled']],
    [at('active', true), 'period_ended_cancelled', 'cancelled', ['purchase.cancelled']],
    [at('active'), 'expire', 'expired', ['purchase.expired']],
    [at('active'), 'superseded', 'expired', ['purchase.expired']],
    [at('active'), 'refunded', 'cancelled', ['purchase.refunded']],
  ] as const)('%j --%s--> %s writing %j', (from, move, to, events) => {
    expect(transition(from, move)).toEqual({ status: to, events });
  });

  it.each([
    [at('cancelled'), 'renewed'],
    [at('expired'), 'reactivate'],
    [at('active'), 'reactivate'],
    [at('active', true), 'schedule_cancellation'],
    [at('active', true), 'renewal_reminder'],
    [at('active'), 'period_ended_cancelled'],
    [at('pending'), 'renewal_failed'],
    [at('cancelled'), 'cancel_now'],
    [null, 'renewed'],
  ] as const)('refuses %j --%s-->', (from, move) => {
    expect(() => transition(from, move)).toThrow(TransitionError);
  });

  it('never leaves a terminal state except by refund, and every move lands on a known status', () => {
    for (const [name, move] of Object.entries(MOVES) as [MoveName, (typeof MOVES)[MoveName]][]) {
      const from: readonly PurchaseStatus[] = move.from;
      if (name !== 'refunded')
        expect(
          from.filter((s) => s === 'cancelled' || s === 'expired'),
          name,
        ).toEqual([]);
      if (move.to !== 'same') expect(PURCHASE_STATUSES).toContain(move.to);
    }
  });
});

describe('billing periods', () => {
  const d = (iso: string) => new Date(iso);
  it('keep the anchor day, clamped to short months', () => {
    let end = d('2026-01-31T10:00:00Z');
    const ends: string[] = [];
    for (let i = 1; i <= 4; i++) {
      end = addMonths(d('2026-01-31T10:00:00Z'), i, 31);
      ends.push(end.toISOString().slice(0, 10));
    }
    expect(ends).toEqual(['2026-02-28', '2026-03-31', '2026-04-30', '2026-05-31']);
  });

  it.each([
    ['weekly', null, '2026-03-01T00:00:00Z', '2026-03-08T00:00:00.000Z'],
    ['monthly', null, '2026-01-15T12:30:00Z', '2026-02-15T12:30:00.000Z'],
    ['quarterly', null, '2026-11-30T00:00:00Z', '2027-02-28T00:00:00.000Z'],
    ['yearly', null, '2028-02-29T00:00:00Z', '2029-02-28T00:00:00.000Z'],
    ['custom', 10, '2026-12-25T00:00:00Z', '2027-01-04T00:00:00.000Z'],
  ] as const)('%s (%s days) from %s ends %s', (billingCycle, billingIntervalDays, start, end) => {
    expect(periodEnd(d(start), { billingCycle, billingIntervalDays }).toISOString()).toBe(end);
  });
});
