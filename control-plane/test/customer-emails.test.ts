import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { creditsProduct } from '../../test/helpers/credit-plans';
import { startMailbox } from '../../test/helpers/mailbox';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Billing mail to a provider's customers, on real PostgreSQL and SMTP: the kinds a provider turns
 * on, the mail each event of them writes in its own transaction and the scheduler's pass sends
 * (a failed renewal with the next try and where to pay, a receipt, a trial ending or ended
 * unpaid, a renewal coming up, a refund, an automatic top-up refused), nothing for a kind left off or a customer without an address, a
 * relay that refuses tried again on the schedule, and passes racing that send each mail once.
 */
const clock = new MovableClock(new Date('2026-03-01T00:00:00.000Z'));
const PUBLIC_URL = 'https://billing.example';
let harness: TestControlPlane;
let mailbox: Awaited<ReturnType<typeof startMailbox>>;
beforeAll(async () => {
  mailbox = await startMailbox();
  harness = await startTestControlPlane({
    bodyLimitBytes: 1024 * 1024,
    clock,
    smtpUrl: mailbox.url,
    publicUrl: PUBLIC_URL,
  });
});
afterAll(async () => {
  await harness?.close();
  await mailbox?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

const at = (iso: string) => clock.set(new Date(iso));
/** The scheduler's whole pass: renewals, then the mail about them. */
const run = () => harness.controlPlane.scheduler.runDue();
/** The mail job alone. */
const sendDue = () => harness.controlPlane.care.customerEmails.runDue();

async function seller(name: string, kinds: Json = {}) {
  const { sandboxKey, liveKey, provider } = await harness.controlPlane.providers.create({
    displayName: name,
  });
  const api = injectClient(harness.controlPlane, sandboxKey);
  if (Object.keys(kinds).length > 0)
    expect((await api('PATCH', '/v1/sdk/customer-emails', kinds)).status).toBe(200);
  const product = (await api('POST', '/v1/ui/products', { name: `${name} tools` })).body;
  const plan = async (body: Json = {}) => {
    const created = await api('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Pro',
      billingCycle: 'monthly',
      type: 'recurring',
      price: 1000,
      ...body,
    });
    expect(created.status).toBe(201);
    return created.body.id as string;
  };
  const card = async (ref: string, number: string, expires = { expMonth: 12, expYear: 2035 }) =>
    expect(
      (
        await api('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
          card: { number, ...expires, cvc: '123' },
        })
      ).status,
    ).toBe(201);
  /** A customer (with this email, or none) on the plan, paid by a good card unless `noCard`. */
  const subscribe = async (
    planRef: string,
    email: string | null,
    options: { noCard?: boolean; expires?: { expMonth: number; expYear: number } } = {},
  ) => {
    const customer = (await api('POST', '/v1/sdk/customers', email === null ? {} : { email, name: 'Ada' }))
      .body;
    if (options.noCard !== true) await card(customer.reference, SANDBOX_CARDS.succeeds, options.expires);
    const activation = await api('POST', '/v1/sdk/activate', { customerRef: customer.reference, planRef });
    expect(activation.status).toBe(200);
    return { customer: customer.reference as string, purchase: activation.body.purchaseRef as string };
  };
  const messages = async (customerRef?: string) => {
    const answer = await api(
      'GET',
      `/v1/sdk/customer-emails/messages${customerRef === undefined ? '' : `?customerRef=${customerRef}`}`,
    );
    expect(answer.status).toBe(200);
    return answer.body.data as Json[];
  };
  const portalUrl = `${PUBLIC_URL}/portal/sign-in/${provider.id}?environment=sandbox`;
  return { api, liveKey, provider, plan, card, subscribe, messages, portalUrl };
}

describe('which billing mails a provider sends', () => {
  it('starts with none, changes only the kinds sent, per environment, and refuses what is not a setting', async () => {
    const s = await seller('Settings Co');
    const none = {
      paymentFailed: false,
      trialEnding: false,
      upcomingRenewal: false,
      receipts: false,
      refunds: false,
      autoTopUpFailed: false,
      expiringCards: false,
      cancellations: false,
    };
    expect(await s.api('GET', '/v1/sdk/customer-emails')).toEqual({ status: 200, body: none });
    expect(await s.api('PATCH', '/v1/sdk/customer-emails', { paymentFailed: true })).toEqual({
      status: 200,
      body: { ...none, paymentFailed: true },
    });
    expect(await s.api('PATCH', '/v1/sdk/customer-emails', { receipts: true, trialEnding: false })).toEqual({
      status: 200,
      body: { ...none, paymentFailed: true, receipts: true },
    });
    expect((await s.api('GET', '/v1/sdk/customer-emails')).body).toEqual({
      ...none,
      paymentFailed: true,
      receipts: true,
    });
    // Live is set apart from the sandbox.
    expect((await s.api('GET', '/v1/sdk/customer-emails', undefined, s.liveKey)).body).toEqual(none);
    for (const bad of [{}, { receipts: 'yes' }, { sms: true }, { receipts: null }])
      expect(await s.api('PATCH', '/v1/sdk/customer-emails', bad)).toMatchObject({
        status: 400,
        body: { code: 'validation_failed' },
      });
    expect((await s.api('GET', '/v1/sdk/customer-emails')).body).toEqual({
      ...none,
      paymentFailed: true,
      receipts: true,
    });
    // Four changes at once, each of another kind: each keeps its own.
    const other = await seller('Racing settings Co');
    const changes = [
      { paymentFailed: true },
      { trialEnding: true },
      { upcomingRenewal: true },
      { receipts: true },
    ];
    const answers = await Promise.all(
      changes.map((body) => other.api('PATCH', '/v1/sdk/customer-emails', body)),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect((await other.api('GET', '/v1/sdk/customer-emails')).body).toEqual({
      ...none,
      paymentFailed: true,
      trialEnding: true,
      upcomingRenewal: true,
      receipts: true,
    });
    expect(await s.api('GET', '/v1/sdk/customer-emails/messages?customerRef=nobody')).toMatchObject({
      status: 404,
      body: { code: 'customer_not_found' },
    });
    expect(await s.api('GET', '/v1/sdk/customer-emails/messages?cursor=bm9wZQ')).toMatchObject({
      status: 400,
      body: { code: 'validation_failed' },
    });
  });
});

describe('mail about payments', () => {
  it('mails a failed renewal with the next try and where to pay, and a receipt for each payment', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Failing Co', { paymentFailed: true, receipts: true });
    const plan = await s.plan();
    const email = 'ada@failing.example';
    const { customer, purchase } = await s.subscribe(plan, email);
    await run();
    const receipt = await mailbox.textFor(email, 0);
    expect(receipt).toContain('Subject: [Sandbox] Failing Co: receipt for your payment of $10.00');
    expect(receipt).toContain('Thank you: we received $10.00 on 1 March 2026 for your Pro plan.');
    expect(receipt).toContain(`Your account, invoices and cards: ${s.portalUrl}`);
    expect(receipt).toContain('This is a sandbox mail: no real money moved.');

    // The card fails from the renewal on: past due, and a mail with the next try and where to pay.
    await s.card(customer, SANDBOX_CARDS.failsLater);
    at('2026-04-01T00:06:00.000Z');
    await run();
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body.status).toBe('past_due');
    const failed = await mailbox.textFor(email, 1);
    expect(failed).toContain('Subject: [Sandbox] Failing Co: your payment of $10.00 failed');
    expect(failed).toContain('We could not collect $10.00 for your Pro plan.');
    expect(failed).toContain('We will try your card again on 2 April 2026. Your access continues meanwhile.');
    expect(failed).toContain(`To pay now or use another card, sign in: ${s.portalUrl}`);
    const open = (await s.api('GET', `/v1/sdk/invoices?purchaseRef=${purchase}&status=open`)).body.data[0];
    expect(failed).toContain(`Invoice: ${open.hostedUrl}`);
    expect(open.hostedUrl.startsWith(`${PUBLIC_URL}/invoice/`)).toBe(true);
    // Another pass sends nothing again.
    await run();
    expect(mailbox.countFor(email)).toBe(2);

    // Paid on request with a good card: a receipt naming the invoice.
    await s.card(customer, SANDBOX_CARDS.succeeds);
    expect((await s.api('POST', `/v1/sdk/invoices/${open.id}/pay`)).body.status).toBe('paid');
    await run();
    const paid = await mailbox.textFor(email, 2);
    expect(paid).toContain('Thank you: we received $10.00 on 1 April 2026 for your Pro plan.');
    expect(paid).toContain(`Invoice: ${open.hostedUrl}`);

    const log = await s.messages(customer);
    expect(log.map((m) => `${m.kind} ${m.status}`)).toEqual([
      'receipt sent',
      'payment_failed sent',
      'receipt sent',
    ]);
    expect(log[1]).toMatchObject({
      customerRef: customer,
      to: email,
      subject: '[Sandbox] Failing Co: your payment of $10.00 failed',
      attempts: 1,
      lastError: null,
    });
    expect(log[1]?.id).toMatch(/^cml_/);
    const event = (await s.api('GET', `/v1/events/${log[1]?.event}`)).body;
    expect(event).toMatchObject({ type: 'purchase.past_due', data: { object: { id: purchase } } });
    // Pages of one.
    const first = await s.api('GET', `/v1/sdk/customer-emails/messages?limit=1&customerRef=${customer}`);
    const second = await s.api(
      'GET',
      `/v1/sdk/customer-emails/messages?limit=1&cursor=${first.body.nextCursor}`,
    );
    expect([first.body.data[0].id, second.body.data[0].id]).toEqual([log[0]?.id, log[1]?.id]);
  });

  it('words the receipt of credits bought at checkout, with the coupon taken off', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Credits Co', { receipts: true });
    const email = 'grace@credits.example';
    const customer = (await s.api('POST', '/v1/sdk/customers', { email })).body.reference as string;
    await s.api('POST', '/v1/sdk/coupons', {
      name: 'Launch',
      code: 'LAUNCH',
      percentOff: 20,
      duration: 'once',
    });
    const session = (
      await s.api('POST', '/v1/sdk/checkout-sessions', {
        customerRef: customer,
        topup: { credits: 1500, amount: 1000, currency: 'usd' },
        coupon: 'LAUNCH',
      })
    ).body;
    const paid = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/checkout/${session.id}/pay`,
      payload: { card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' } },
    });
    expect(paid.statusCode).toBe(200);
    await sendDue();
    const receipt = await mailbox.textFor(email, 0);
    expect(receipt).toContain('receipt for your payment of $8.00');
    expect(receipt).toContain(
      'Thank you: we received $8.00 on 1 March 2026 for 1,500 credits ($10.00 less Launch).',
    );
  });

  it('mails nothing of a kind left off, and skips a customer without an address', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Quiet Co', { receipts: true });
    const plan = await s.plan();
    const nobody = await s.subscribe(plan, null);
    const grace = await s.subscribe(plan, 'grace@quiet.example');
    await s.card(grace.customer, SANDBOX_CARDS.failsLater);
    at('2026-04-01T00:06:00.000Z');
    await run();
    expect((await s.api('GET', `/v1/sdk/purchases/${grace.purchase}`)).body.status).toBe('past_due');
    expect(mailbox.countFor('grace@quiet.example')).toBe(1);
    expect((await s.messages(grace.customer)).map((m) => `${m.kind} ${m.status}`)).toEqual(['receipt sent']);
    // Both of its payments (the first, and the renewal of 1 April) are receipts nobody could be sent.
    const skipped = {
      kind: 'receipt',
      status: 'skipped',
      to: null,
      lastError: 'the customer has no email address',
    };
    expect(await s.messages(nobody.customer)).toMatchObject([skipped, skipped]);
    // A kind turned off before its mail went: skipped, not sent.
    await s.subscribe(plan, 'ada@quiet.example');
    expect((await s.api('PATCH', '/v1/sdk/customer-emails', { receipts: false })).status).toBe(200);
    await run();
    expect(mailbox.countFor('ada@quiet.example')).toBe(0);
    expect((await s.messages())[0]).toMatchObject({
      kind: 'receipt',
      status: 'skipped',
      lastError: 'this kind of mail was turned off',
    });
    // A provider that never turned mail on has none.
    const other = await seller('Silent Co');
    await other.subscribe(await other.plan(), 'linus@silent.example');
    await run();
    expect(await other.messages()).toEqual([]);
    expect(mailbox.countFor('linus@silent.example')).toBe(0);
  });
});

describe('mail about refunds and automatic top-ups', () => {
  it('tells a customer of a refund, with the payment it returns money of', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Refund Co', { refunds: true });
    const email = 'ada@refund.example';
    const { customer } = await s.subscribe(await s.plan(), email);
    const payment = (
      await harness.pool.query<{ transaction_reference: string }>(
        'SELECT transaction_reference FROM payments WHERE customer_id = $1',
        [customer],
      )
    ).rows[0]?.transaction_reference;
    at('2026-03-03T09:00:00.000Z');
    const refund = await s.api('POST', '/v1/ui/transactions/refunds', {
      originalTransactionId: payment,
      refundAmount: 400,
      reason: 'outage on 2 March',
    });
    expect(refund.status).toBe(202);
    await run();
    // The refund's events name the customer, so they are among the customer's own.
    const refunded = (await s.api('GET', `/v1/events?type=payment.refunded&customerRef=${customer}`)).body
      .data as Json[];
    expect(refunded.map((e) => e.data.object)).toMatchObject([{ id: refund.body.id, customer, amount: 400 }]);
    expect(mailbox.countFor(email)).toBe(1);
    const mail = await mailbox.textFor(email, 0);
    expect(mail).toContain('Subject: [Sandbox] Refund Co: your refund of $4.00');
    expect(mail).toContain(
      'We have refunded $4.00 of your payment of $10.00 on 1 March 2026 for your Pro plan.',
    );
    expect(mail).toContain('your bank may take 5 to 10 days to show it.');
    const invoice = (await s.api('GET', `/v1/sdk/invoices?customerRef=${customer}`)).body.data[0];
    expect(mail).toContain(`Invoice: ${invoice.hostedUrl}`);
    // The provider's own reason is not the customer's to read.
    expect(mail).not.toContain('outage');
    expect((await s.messages(customer)).map((m) => `${m.kind} ${m.status}`)).toEqual(['refund sent']);
  });

  it('tells a customer their automatic top-up was refused, when it is tried again, and when it stops', async () => {
    at('2026-03-01T09:00:00.000Z');
    const s = await seller('Top-up Co', { autoTopUpFailed: true });
    const { product, plan } = await creditsProduct(s.api);
    const email = 'ada@topup.example';
    const id = (await s.api('POST', '/v1/sdk/customers', { externalRef: 'ada-topup', email })).body
      .id as string;
    await s.card('ada-topup', SANDBOX_CARDS.failsLater);
    // A credit to activate the plan with, spent at once: the balance is under the threshold.
    expect(
      (await s.api('POST', '/v1/sdk/customers/ada-topup/credits', { kind: 'grant', amount: 1 })).status,
    ).toBe(201);
    expect(
      (await s.api('POST', '/v1/sdk/activate', { customerRef: 'ada-topup', planRef: plan })).status,
    ).toBe(200);
    expect(
      (await s.api('POST', '/v1/sdk/customers/ada-topup/credits', { kind: 'debit', amount: 1 })).status,
    ).toBe(201);
    expect(
      (
        await s.api('PUT', '/v1/sdk/customers/ada-topup/auto-top-up', {
          productRef: product,
          threshold: 10,
          packs: 2,
        })
      ).status,
    ).toBe(200);
    const auth = { providerId: s.provider.id, environment: 'sandbox' as const };
    const check = () => harness.controlPlane.care.autoTopUps.check(auth, id);
    // Setting it tries the first top-up at once (the balance under the threshold), as this check
    // does: one of the two makes the attempt, refused; the other finds it held back.
    expect(['failed', 'none']).toContain((await check()).kind);
    expect((await s.api('GET', '/v1/sdk/customers/ada-topup/auto-top-up')).body).toMatchObject({
      failures: 1,
    });
    await sendDue();
    const first = await mailbox.textFor(email, 0);
    expect(first).toContain('Subject: [Sandbox] Top-up Co: your automatic top-up of $10.00 failed');
    expect(first).toContain(
      'We could not add 100 credits ($10.00) to your balance automatically: your card was declined.',
    );
    expect(first).toContain(
      `We will try again on 1 March 2026, 10:00 UTC. To use another card, sign in: ${s.portalUrl}`,
    );
    clock.advance(60 * 60_000);
    expect(await check()).toMatchObject({ kind: 'failed', stopped: false });
    clock.advance(6 * 60 * 60_000);
    expect(await check()).toMatchObject({ kind: 'failed', stopped: true });
    await sendDue();
    expect(mailbox.countFor(email)).toBe(3);
    const last = await mailbox.textFor(email, 2);
    expect(last).toContain(
      `Automatic top-ups have stopped after 3 failed attempts in a row. To start them again, check your card and save your auto top-up: ${s.portalUrl}`,
    );
    expect((await s.messages(id)).map((m) => `${m.kind} ${m.status}`)).toEqual([
      'auto_topup_failed sent',
      'auto_topup_failed sent',
      'auto_topup_failed sent',
    ]);
  });
});

describe('expiring cards', () => {
  it('announces a default card in the month it expires, once, to customers who will be charged again', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Card Co', { expiringCards: true });
    const plan = await s.plan();
    const march = { expMonth: 3, expYear: 2026 };
    const renewing = await s.subscribe(plan, 'ada@card.example', { expires: march });
    // Its plan set to end with the period: it will not be charged again.
    const leaving = await s.subscribe(plan, 'linus@card.example', { expires: march });
    expect(
      (await s.api('POST', `/v1/sdk/purchases/${leaving.purchase}/cancel`, { atPeriodEnd: true })).status,
    ).toBe(200);
    // A card of April's: not this month.
    const later = await s.subscribe(plan, 'grace@card.example', { expires: { expMonth: 4, expYear: 2026 } });

    at('2026-03-02T08:00:00.000Z');
    await run();
    await run();
    const announced = async () =>
      ((await s.api('GET', '/v1/events?type=customer.card_expiring&limit=100')).body.data as Json[]).map(
        (e) => e.data.object,
      );
    expect(await announced()).toEqual([
      {
        id: renewing.customer,
        object: 'customer',
        card: {
          id: expect.stringMatching(/^pm_/),
          brand: 'visa',
          last4: '4242',
          exp_month: 3,
          exp_year: 2026,
        },
      },
    ]);
    const mail = await mailbox.textFor('ada@card.example', 0);
    expect(mail).toContain('Subject: [Sandbox] Card Co: your Visa card ending 4242 expires this month');
    expect(mail).toContain(
      'The Visa card ending 4242 your payments are taken from expires at the end of March 2026.',
    );
    expect(mail).toContain(
      `To keep your service without a break, add a new card before then: ${s.portalUrl}`,
    );
    expect(mailbox.countFor('linus@card.example')).toBe(0);
    expect(mailbox.countFor('grace@card.example')).toBe(0);

    // In April, April's card; March's is not announced again.
    at('2026-04-01T00:06:00.000Z');
    await run();
    expect((await announced()).map((o) => o.id)).toEqual([later.customer, renewing.customer]);
    expect(mailbox.countFor('ada@card.example')).toBe(1);

    // A customer on a test clock: announced when the clock reaches the month, at its time.
    const testClock = (await s.api('POST', '/v1/sdk/test-clocks', { frozenTime: '2026-05-20T00:00:00Z' }))
      .body;
    const onClock = (
      await s.api('POST', '/v1/sdk/customers', { testClock: testClock.id, email: 'fay@card.example' })
    ).body.reference as string;
    await s.card(onClock, SANDBOX_CARDS.succeeds, { expMonth: 6, expYear: 2026 });
    expect((await s.api('POST', '/v1/sdk/activate', { customerRef: onClock, planRef: plan })).status).toBe(
      200,
    );
    await run();
    expect(await s.messages(onClock)).toEqual([]);
    const advanced = await s.api('POST', `/v1/sdk/test-clocks/${testClock.id}/advance`, {
      frozenTime: '2026-06-03T00:00:00Z',
    });
    expect(advanced.body.status).toBe('ready');
    const events = (await s.api('GET', `/v1/events?type=customer.card_expiring&customerRef=${onClock}`)).body
      .data as Json[];
    expect(events).toHaveLength(1);
    expect(events[0]?.created).toBeGreaterThanOrEqual(Date.parse('2026-06-01T00:00:00Z') / 1000);
    // Its mail goes at once by the real clock, which this test's fake one must pass the clock's time for.
    at('2026-06-03T00:01:00.000Z');
    await sendDue();
    expect(await mailbox.textFor('fay@card.example', 0)).toContain('expires at the end of June 2026.');
  });
});

describe('mail about trials and renewals', () => {
  it('tells a trial is ending, that it ended unpaid, and that a renewal is coming', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Trial Co', { trialEnding: true, paymentFailed: true, upcomingRenewal: true });
    const trial = await s.plan({ name: 'Starter', trialDays: 14 });
    const ada = 'ada@trial.example';
    const linus = 'linus@trial.example';
    const trialing = await s.subscribe(trial, ada, { noCard: true });
    const monthly = await s.subscribe(await s.plan(), linus);
    expect((await s.api('GET', `/v1/sdk/purchases/${trialing.purchase}`)).body.status).toBe('trialing');

    at('2026-03-12T01:00:00.000Z');
    await run();
    const ending = await mailbox.textFor(ada, 0);
    expect(ending).toContain('Subject: [Sandbox] Trial Co: your trial ends on 15 March 2026');
    expect(ending).toContain('Your trial of your Starter plan ends on 15 March 2026.');
    expect(ending).toContain(`To keep using it after that ($10.00), add a card: ${s.portalUrl}`);

    at('2026-03-15T00:06:00.000Z');
    await run();
    expect((await s.api('GET', `/v1/sdk/purchases/${trialing.purchase}`)).body.status).toBe('suspended');
    const ended = await mailbox.textFor(ada, 1);
    expect(ended).toContain('Subject: [Sandbox] Trial Co: your trial has ended: payment needed');
    expect(ended).toContain(
      'Your trial of your Starter plan has ended, and we could not take the first payment of $10.00.',
    );

    at('2026-03-25T01:00:00.000Z');
    await run();
    const renewal = await mailbox.textFor(linus, 0);
    expect(renewal).toContain('Subject: [Sandbox] Trial Co: your Pro plan renews on 1 April 2026');
    expect(renewal).toContain(
      'Your Pro plan renews on 1 April 2026, for $10.00 plus any usage of the period.',
    );
    expect(renewal).toContain('It is charged to your card on file.');
    expect((await s.messages(monthly.customer)).map((m) => m.kind)).toEqual(['upcoming_renewal']);
    expect(mailbox.countFor(ada)).toBe(2);
  });
});

describe('mail about cancellations', () => {
  it('confirms a cancellation at the period end and its end, one made now, and one that failed payments made', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Leaving Co', { cancellations: true });
    const plan = await s.plan();
    const cancel = (purchase: string, body: Json) =>
      s.api('POST', `/v1/sdk/purchases/${purchase}/cancel`, body).then((a) => expect(a.status).toBe(200));
    const status = async (purchase: string) =>
      (await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body.status as string;

    // At the period's end: the day it ends and how to keep it now, then that it ended.
    const lin = 'lin@leaving.example';
    const leaving = await s.subscribe(plan, lin);
    await cancel(leaving.purchase, {
      atPeriodEnd: true,
      cancellationDetails: { feedback: 'unused', comment: 'Not for now' },
    });
    await sendDue();
    const scheduled = await mailbox.textFor(lin, 0);
    expect(scheduled).toContain(
      'Your Pro plan is cancelled: it stays active until 1 April 2026, and it will not renew.',
    );
    expect(scheduled).toContain(`Changed your mind? Keep your plan before then: ${s.portalUrl}`);
    // The customer's own words are the provider's, not read back.
    expect(scheduled).not.toContain('Not for now');

    // Now: one mail, the day it ended.
    const max = 'max@leaving.example';
    const now = await s.subscribe(plan, max);
    const kim = 'kim@leaving.example';
    const failing = await s.subscribe(plan, kim);
    at('2026-03-20T12:00:00.000Z');
    await cancel(now.purchase, {});
    expect(await status(now.purchase)).toBe('cancelled');
    await sendDue();
    const endedNow = await mailbox.textFor(max, 0);
    expect(endedNow).toContain(
      'Your Pro plan was cancelled and ended on 20 March 2026; your access to it has stopped.',
    );

    // The card that fails from the renewal on, until dunning gives up.
    await s.card(failing.customer, SANDBOX_CARDS.failsLater);
    at('2026-04-01T00:06:00.000Z');
    await run();
    expect(await status(leaving.purchase)).toBe('cancelled');
    const ended = await mailbox.textFor(lin, 1);
    expect(ended).toContain(
      'Your Pro plan was cancelled and ended on 1 April 2026; your access to it has stopped.',
    );
    for (const hours of [24, 72, 168]) {
      clock.advance(hours * 3_600_000);
      await run();
    }
    expect(await status(failing.purchase)).toBe('cancelled');
    const unpaid = await mailbox.textFor(kim, 0);
    expect(unpaid).toContain(
      'We could not collect payment for your Pro plan after several tries, so it was cancelled on 12 April 2026, and your access to it has stopped.',
    );

    // One mail per event, none sent twice.
    await run();
    expect([mailbox.countFor(lin), mailbox.countFor(max), mailbox.countFor(kim)]).toEqual([2, 1, 1]);
    const subjects = async (customer: string) =>
      (await s.messages(customer)).map((m) => `${m.kind} ${m.status}: ${m.subject}`);
    expect(await subjects(leaving.customer)).toEqual([
      'cancellation sent: [Sandbox] Leaving Co: your Pro plan has ended',
      'cancellation sent: [Sandbox] Leaving Co: your Pro plan is cancelled and ends on 1 April 2026',
    ]);
    expect(await subjects(now.customer)).toEqual([
      'cancellation sent: [Sandbox] Leaving Co: your Pro plan has ended',
    ]);
    expect(await subjects(failing.customer)).toEqual([
      'cancellation sent: [Sandbox] Leaving Co: your Pro plan was cancelled: payment failed',
    ]);
  });
});

describe('sending', () => {
  it('tries a mail the relay refused again on the schedule, then gives up; racing passes send each once', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Relay Co', { receipts: true });
    const plan = await s.plan();
    const emails = ['a@relay.example', 'b@relay.example', 'c@relay.example'];
    for (const email of emails) await s.subscribe(plan, email);
    mailbox.refuse(3);
    expect(await sendDue()).toBe(0);
    const refused = await s.messages();
    expect(refused).toHaveLength(3);
    for (const m of refused) {
      expect(m).toMatchObject({ status: 'pending', attempts: 1, to: null });
      expect(m.lastError).toContain('mailbox busy');
    }
    // Not before a minute has passed; then five passes at once send each mail once.
    at('2026-03-01T00:00:30.000Z');
    expect(await sendDue()).toBe(0);
    at('2026-03-01T00:01:01.000Z');
    const sent = await Promise.all(Array.from({ length: 5 }, sendDue));
    expect(sent.reduce((a, b) => a + b, 0)).toBe(3);
    for (const email of emails) expect(mailbox.countFor(email)).toBe(1);
    expect((await s.messages()).map((m) => `${m.status} ${m.attempts}`)).toEqual(emails.map(() => 'sent 2'));

    // Refused every time: tried after 1, 5, 30, 120 and 360 minutes, then failed.
    const last = 'd@relay.example';
    await s.subscribe(plan, last);
    mailbox.refuse(100);
    let now = clock.now().getTime();
    for (const minutes of [0, 1, 5, 30, 120, 360]) {
      now += minutes * 60_000 + 1000;
      clock.set(new Date(now));
      await sendDue();
    }
    mailbox.refuse(0);
    clock.set(new Date(now + 24 * 3600_000));
    await sendDue();
    expect(mailbox.countFor(last)).toBe(0);
    expect((await s.messages())[0]).toMatchObject({ status: 'failed', attempts: 6, to: null });
  });
});
