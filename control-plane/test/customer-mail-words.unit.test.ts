import { describe, expect, it } from 'vitest';
import { composeMail, type MailFacts } from '../src/modules/customer-emails/compose';

/** The words of billing mail to customers, for the cases the integration test does not meet. */
const base: MailFacts = {
  kind: 'payment_failed',
  type: 'purchase.past_due',
  occurredAt: Date.UTC(2026, 4, 12, 9) / 1000,
  object: { amount: 2500, currency: 'eur', nextRetryAt: null },
  sandbox: false,
  merchant: { displayName: 'Acme', supportEmail: 'help@acme.example' },
  customerName: null,
  planName: null,
  invoice: null,
  payment: null,
  topUp: null,
  hasCard: true,
  portalUrl: 'https://billing.example/portal/sign-in/prv_1',
};

describe('billing mail words', () => {
  it('words a live failed payment with no next try, no plan name and no invoice', () => {
    const { subject, text } = composeMail(base);
    expect(subject).toBe('Acme: your payment of €25.00 failed');
    expect(text).toContain('Hello,\n\nWe could not collect €25.00 for your plan.');
    expect(text).toContain('Please pay it soon to keep your access.');
    expect(text).not.toContain('Invoice:');
    expect(text).toContain('Questions? Write to help@acme.example.');
    expect(text).not.toContain('sandbox');
  });

  it("says what a top-up's receipt bought, and the coupon taken off its price", () => {
    const receipt = (topUp: MailFacts['topUp']) =>
      composeMail({
        ...base,
        kind: 'receipt',
        type: 'payment.succeeded',
        object: { amount: 800, currency: 'usd', created: Date.UTC(2026, 11, 2) / 1000 },
        topUp,
      }).text;
    expect(receipt({ credits: 1000, subtotal: 1000, coupon: 'Launch' })).toContain(
      'Thank you: we received $8.00 on 2 December 2026 for 1,000 credits ($10.00 less Launch).',
    );
    expect(receipt({ credits: 1, subtotal: null, coupon: null })).toContain(
      'Thank you: we received $8.00 on 2 December 2026 for 1 credit.',
    );
    expect(receipt(null)).toContain('Thank you: we received $8.00 on 2 December 2026.');
  });

  it('takes the amount owed from the open invoice, usage included, over the plan’s price', () => {
    const { subject } = composeMail({
      ...base,
      invoice: { total: 3175, currency: 'eur', hostedUrl: 'https://billing.example/invoice/x' },
    });
    expect(subject).toBe('Acme: your payment of €31.75 failed');
  });

  it('names the customer, and asks for a card when a renewal or trial has none to charge', () => {
    const renewal = composeMail({
      ...base,
      kind: 'upcoming_renewal',
      type: 'purchase.renewal_reminder',
      object: { amount: 900, currency: 'usd', periodEnd: Date.UTC(2026, 4, 1) / 1000 },
      customerName: 'Ada',
      planName: 'Team',
      hasCard: false,
      merchant: { displayName: 'Acme', supportEmail: null },
    });
    expect(renewal.subject).toBe('Acme: your Team plan renews on 1 May 2026');
    expect(renewal.text).toContain('Hello Ada,');
    expect(renewal.text).toContain(`There is no card on file to charge; add one: ${base.portalUrl}`);
    expect(renewal.text).not.toContain('Questions?');
    const trial = composeMail({
      ...base,
      kind: 'trial_ending',
      type: 'purchase.trial_ending',
      object: { amount: 900 },
    });
    expect(trial.subject).toBe('Acme: your trial ends soon');
    expect(trial.text).toContain('Then $9.00 is charged to your card on file, and your plan continues.');
  });

  it('words a refund with or without the payment it returns, and a code it does not know', () => {
    const refund = {
      ...base,
      kind: 'refund' as const,
      type: 'payment.refunded',
      object: { amount: 400, currency: 'usd', payment: 'pay_1' },
    };
    const whole = composeMail({
      ...refund,
      planName: 'Pro',
      payment: { amount: 1000, currency: 'usd', createdAt: new Date('2026-04-01T08:00:00Z') },
    });
    expect(whole.subject).toBe('Acme: your refund of $4.00');
    expect(whole.text).toContain(
      'We have refunded $4.00 of your payment of $10.00 on 1 April 2026 for your Pro plan.',
    );
    expect(whole.text).toContain('your bank may take 5 to 10 days to show it.');
    expect(composeMail(refund).text).toContain('We have refunded $4.00 to you.\n');
    const topUp = {
      ...base,
      kind: 'auto_topup_failed' as const,
      type: 'credits.auto_topup_failed',
      object: { failure_reason: 'do_not_honor', failures: 1, stopped: false, retry_at: null },
    };
    const unpriced = composeMail(topUp);
    expect(unpriced.subject).toBe('Acme: your automatic top-up failed');
    expect(unpriced.text).toContain(
      'We could not top up your credits automatically: the payment was refused (do_not_honor).',
    );
    // No next try named: told it stopped, and how to start it again.
    expect(unpriced.text).toContain(
      'Automatic top-ups have stopped after this failed attempt. To start them again, check your card',
    );
  });

  it('words an expiring card by its brand and month, and a brand or expiry it does not know', () => {
    const expiring = (card: Record<string, unknown>) =>
      composeMail({
        ...base,
        kind: 'card_expiring' as const,
        type: 'customer.card_expiring',
        object: { card },
      });
    const visa = expiring({ brand: 'mastercard', last4: '4444', exp_month: 12, exp_year: 2026 });
    expect(visa.subject).toBe('Acme: your Mastercard ending 4444 expires this month');
    expect(visa.text).toContain(
      'The Mastercard ending 4444 your payments are taken from expires at the end of December 2026.',
    );
    const odd = expiring({ brand: 'elo', last4: '0000', exp_month: 'x', exp_year: 2026 });
    expect(odd.subject).toBe('Acme: your card ending 0000 expires soon');
    expect(odd.text).toContain('The card ending 0000 your payments are taken from expires soon.');
  });
  it('words a cancellation: to end with its period, ended, or ended after failed payments', () => {
    const cancellation = (type: string, object: Record<string, unknown>, planName: string | null = 'Pro') =>
      composeMail({ ...base, kind: 'cancellation', type, object, planName });
    const scheduled = cancellation('purchase.cancellation_scheduled', {
      periodEnd: Date.UTC(2026, 5, 1) / 1000,
      cancellationDetails: { reason: 'cancellation_requested' },
    });
    expect(scheduled.subject).toBe('Acme: your Pro plan is cancelled and ends on 1 June 2026');
    expect(scheduled.text).toContain(
      'Your Pro plan is cancelled: it stays active until 1 June 2026, and it will not renew.',
    );
    expect(scheduled.text).toContain(`Changed your mind? Keep your plan before then: ${base.portalUrl}`);
    // No period end known: no day made up.
    const open = cancellation('purchase.cancellation_scheduled', { periodEnd: null }, null);
    expect(open.subject).toBe('Acme: your plan is cancelled');
    expect(open.text).toContain('Your plan is cancelled and will not renew.');

    const ended = cancellation('purchase.cancelled', {
      cancellationDetails: { reason: 'cancellation_requested', feedback: 'unused', comment: 'private' },
    });
    expect(ended.subject).toBe('Acme: your Pro plan has ended');
    expect(ended.text).toContain(
      'Your Pro plan was cancelled and ended on 12 May 2026; your access to it has stopped.',
    );
    // What the customer told the provider is not read back to them.
    expect(ended.text).not.toContain('private');
    expect(cancellation('purchase.cancelled', { cancellationDetails: null }).subject).toBe(
      'Acme: your Pro plan has ended',
    );

    const unpaid = cancellation('purchase.cancelled', { cancellationDetails: { reason: 'payment_failed' } });
    expect(unpaid.subject).toBe('Acme: your Pro plan was cancelled: payment failed');
    expect(unpaid.text).toContain(
      'We could not collect payment for your Pro plan after several tries, so it was cancelled on 12 May 2026, and your access to it has stopped.',
    );
  });
});
