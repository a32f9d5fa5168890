import { formatMoney } from '../checkout/page';
import type { MailKind } from './repository';

/** What a customer mail says, gathered when it is sent (service.ts); pure words from here on. */
export interface MailFacts {
  kind: MailKind;
  /** The event's type (purchase.past_due, purchase.suspended, …), when it happened (Unix seconds) and its object. */
  type: string;
  occurredAt: number;
  object: Record<string, unknown>;
  sandbox: boolean;
  merchant: { displayName: string; supportEmail: string | null };
  customerName: string | null;
  planName: string | null;
  /** The invoice the mail is about: the open one a failed payment left, or the one a payment paid. */
  invoice: { total: number; currency: string; hostedUrl: string | null } | null;
  /** The payment a receipt is for, or the one a refund returns money of. */
  payment: { amount: number; currency: string; createdAt: Date } | null;
  /** The credits a receipt's payment bought at checkout, with the coupon it took off; else null. */
  topUp: { credits: number; subtotal: number | null; coupon: string | null } | null;
  /** Whether the customer has a card their next payment can be taken from. */
  hasCard: boolean;
  /** Where the customer signs in to their portal (pay now, cards, invoices). */
  portalUrl: string;
}

const number = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const text = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

/** What a top-up's receipt says was bought: " for 1,000 credits ($10.00 less Launch)". */
function boughtWords(f: MailFacts, money: (amount: number) => string): string {
  if (f.topUp === null) return '';
  const credits = `${f.topUp.credits.toLocaleString('en')} credit${f.topUp.credits === 1 ? '' : 's'}`;
  const less =
    f.topUp.coupon === null || f.topUp.subtotal === null
      ? ''
      : ` (${money(f.topUp.subtotal)} less ${f.topUp.coupon})`;
  return ` for ${credits}${less}`;
}

/** A Unix-seconds field as a day a customer reads: "12 May 2026" (UTC). */
function day(seconds: number | null): string | null {
  if (seconds === null) return null;
  return new Intl.DateTimeFormat('en-GB', {
    day: 'numeric',
    month: 'long',
    year: 'numeric',
    timeZone: 'UTC',
  }).format(new Date(seconds * 1000));
}

/** A Unix-seconds field as a moment a customer reads: "1 July 2026, 10:00 UTC". */
function moment(seconds: number | null): string | null {
  if (seconds === null) return null;
  const hhmm = new Date(seconds * 1000).toISOString().slice(11, 16);
  return `${day(seconds)}, ${hhmm} UTC`;
}

/** Why a payment was refused, in the customer's words; a code not known here is shown as it is. */
const REFUSED: Readonly<Record<string, string>> = {
  card_declined: 'your card was declined',
  insufficient_funds: 'your card has insufficient funds',
  expired_or_canceled_card: 'your card has expired or was cancelled',
  no_payment_method: 'there is no card on file',
  no_plan: 'you no longer have a plan these credits are for',
  no_top_up_pack: 'your plan no longer offers top-ups',
};
const refusal = (code: string | null) =>
  code === null ? 'the payment was refused' : (REFUSED[code] ?? `the payment was refused (${code})`);

/** A card's brand as a customer reads it (Stripe's and the sandbox's codes); others are a "card". */
const BRANDS: Readonly<Record<string, string>> = {
  visa: 'Visa card',
  mastercard: 'Mastercard',
  amex: 'American Express card',
  discover: 'Discover card',
  diners: 'Diners Club card',
  jcb: 'JCB card',
  unionpay: 'UnionPay card',
};

/** The subject and plain text of one mail; the subject names the merchant, as alert mails do. */
export function composeMail(f: MailFacts): { subject: string; text: string } {
  const o = f.object;
  const currency = text(o.currency) ?? f.invoice?.currency ?? 'usd';
  const money = (amount: number) => formatMoney(amount, currency);
  const amount = f.invoice?.total ?? number(o.amount) ?? 0;
  const plan = f.planName === null ? 'your plan' : `your ${f.planName} plan`;
  // The same at the start of a sentence.
  const Plan = `Y${plan.slice(1)}`;
  const body: string[] = [];
  let subject: string;
  switch (f.kind) {
    case 'payment_failed': {
      if (f.type === 'purchase.suspended') {
        subject = 'your trial has ended: payment needed';
        body.push(
          `Your trial of ${plan} has ended, and we could not take the first payment of ${money(amount)}.`,
          `Your access is paused until it is paid. Sign in to add a card and pay: ${f.portalUrl}`,
        );
      } else {
        const next = day(number(o.nextRetryAt));
        subject = `your payment of ${money(amount)} failed`;
        body.push(
          `We could not collect ${money(amount)} for ${plan}.`,
          next === null
            ? 'Please pay it soon to keep your access.'
            : `We will try your card again on ${next}. Your access continues meanwhile.`,
          `To pay now or use another card, sign in: ${f.portalUrl}`,
          ...(f.invoice?.hostedUrl == null ? [] : [`Invoice: ${f.invoice.hostedUrl}`]),
        );
      }
      break;
    }
    case 'trial_ending': {
      const ends = day(number(o.trialEnd));
      subject = `your trial ends${ends === null ? ' soon' : ` on ${ends}`}`;
      body.push(
        `Your trial of ${plan} ends${ends === null ? ' soon' : ` on ${ends}`}.`,
        f.hasCard
          ? `Then ${money(amount)} is charged to your card on file, and your plan continues.`
          : `To keep using it after that (${money(amount)}), add a card: ${f.portalUrl}`,
      );
      break;
    }
    case 'upcoming_renewal': {
      const renews = day(number(o.periodEnd));
      subject = `${plan} renews${renews === null ? ' soon' : ` on ${renews}`}`;
      body.push(
        `${Plan} renews${renews === null ? ' soon' : ` on ${renews}`}, for ${money(number(o.amount) ?? 0)} plus any usage of the period.`,
        f.hasCard
          ? 'It is charged to your card on file.'
          : `There is no card on file to charge; add one: ${f.portalUrl}`,
      );
      break;
    }
    case 'receipt': {
      const paid = number(o.amount) ?? 0;
      const when = day(number(o.created));
      subject = `receipt for your payment of ${money(paid)}`;
      body.push(
        `Thank you: we received ${money(paid)}${when === null ? '' : ` on ${when}`}${f.planName === null ? '' : ` for ${plan}`}${boughtWords(f, money)}.`,
        ...(text(o.transaction_reference) === null ? [] : [`Reference: ${text(o.transaction_reference)}`]),
        ...(f.invoice?.hostedUrl == null ? [] : [`Invoice: ${f.invoice.hostedUrl}`]),
      );
      break;
    }
    case 'refund': {
      const refunded = number(o.amount) ?? 0;
      const paid = f.payment;
      subject = `your refund of ${money(refunded)}`;
      body.push(
        paid === null
          ? `We have refunded ${money(refunded)} to you${f.planName === null ? '' : ` for ${plan}`}.`
          : `We have refunded ${money(refunded)} of your payment of ${formatMoney(paid.amount, paid.currency)} on ${day(Math.floor(paid.createdAt.getTime() / 1000))}${f.planName === null ? '' : ` for ${plan}`}.`,
        'It goes back to the card the payment was taken from; your bank may take 5 to 10 days to show it.',
        ...(f.invoice?.hostedUrl == null ? [] : [`Invoice: ${f.invoice.hostedUrl}`]),
      );
      break;
    }
    case 'auto_topup_failed': {
      const asked = number(o.amount);
      const credits = number(o.credits);
      const why = refusal(text(o.failure_reason));
      subject =
        asked === null ? 'your automatic top-up failed' : `your automatic top-up of ${money(asked)} failed`;
      body.push(
        asked === null || credits === null
          ? `We could not top up your credits automatically: ${why}.`
          : `We could not add ${credits.toLocaleString('en-US')} credits (${money(asked)}) to your balance automatically: ${why}.`,
      );
      const retry = moment(number(o.retry_at));
      const failures = number(o.failures) ?? 1;
      if (o.stopped === true || retry === null)
        body.push(
          `Automatic top-ups have stopped after ${failures === 1 ? 'this failed attempt' : `${failures} failed attempts in a row`}. To start them again, check your card and save your auto top-up: ${f.portalUrl}`,
        );
      else body.push(`We will try again on ${retry}. To use another card, sign in: ${f.portalUrl}`);
      break;
    }
    case 'card_expiring': {
      const card = (o.card ?? {}) as Record<string, unknown>;
      const month = number(card.exp_month);
      const year = number(card.exp_year);
      const ends =
        month === null || year === null
          ? 'soon'
          : `at the end of ${new Intl.DateTimeFormat('en-GB', { month: 'long', year: 'numeric', timeZone: 'UTC' }).format(new Date(Date.UTC(year, month - 1, 1)))}`;
      const which = `${BRANDS[text(card.brand) ?? ''] ?? 'card'} ending ${text(card.last4) ?? '····'}`;
      subject = `your ${which} expires ${ends === 'soon' ? 'soon' : 'this month'}`;
      body.push(
        `The ${which} your payments are taken from expires ${ends}.`,
        `To keep your service without a break, add a new card before then: ${f.portalUrl}`,
      );
      break;
    }
    case 'cancellation': {
      const details = (o.cancellationDetails ?? {}) as Record<string, unknown>;
      if (f.type === 'purchase.cancellation_scheduled') {
        const ends = day(number(o.periodEnd));
        subject = `${plan} is cancelled${ends === null ? '' : ` and ends on ${ends}`}`;
        body.push(
          ends === null
            ? `${Plan} is cancelled and will not renew.`
            : `${Plan} is cancelled: it stays active until ${ends}, and it will not renew.`,
          `Changed your mind? Keep your plan before then: ${f.portalUrl}`,
        );
      } else if (details.reason === 'payment_failed') {
        subject = `${plan} was cancelled: payment failed`;
        body.push(
          `We could not collect payment for ${plan} after several tries, so it was cancelled on ${day(f.occurredAt)}, and your access to it has stopped.`,
        );
      } else {
        subject = `${plan} has ended`;
        body.push(`${Plan} was cancelled and ended on ${day(f.occurredAt)}; your access to it has stopped.`);
      }
      break;
    }
  }
  const greeting = f.customerName === null ? 'Hello,' : `Hello ${f.customerName},`;
  const footer = [
    `Your account, invoices and cards: ${f.portalUrl}`,
    ...(f.merchant.supportEmail === null ? [] : [`Questions? Write to ${f.merchant.supportEmail}.`]),
    ...(f.sandbox ? ['This is a sandbox mail: no real money moved.'] : []),
  ];
  return {
    subject: `${f.sandbox ? '[Sandbox] ' : ''}${f.merchant.displayName}: ${subject}`,
    text: [greeting, '', ...body, '', ...footer, '', f.merchant.displayName].join('\n'),
  };
}
