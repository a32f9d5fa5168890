import { callRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { startMailbox } from '../../test/helpers/mailbox';
import { MovableClock } from '../src/clock';

/**
 * Spend and usage alerts (issue 64), clock-driven on real PostgreSQL, ClickHouse (chdb) and SMTP:
 * a plan's allowance alerts at 50 % and 100 % and a customer's own at 80 % each fire once as the
 * calls of a period cross them (one event and one mail each, however many passes run), again in
 * the next period; a credit balance alert fires once per funding. Bad input is refused.
 */
const clock = new MovableClock(new Date('2026-03-01T00:00:00.000Z'));
let harness: TestControlPlane;
let mailbox: Awaited<ReturnType<typeof startMailbox>>;
beforeAll(async () => {
  mailbox = await startMailbox();
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, smtpUrl: mailbox.url });
});
afterAll(async () => {
  await harness?.close();
  await mailbox?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

describe('alerts', () => {
  it('fire once per crossing and period, as an event and a mail', async () => {
    const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Alert Co' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    const product = (await api('POST', '/v1/ui/products', { name: 'Search' })).body.id as string;
    const plan = (
      await api('POST', `/v1/ui/products/${product}/plans`, {
        name: 'Free tier',
        type: 'recurring',
        billingCycle: 'monthly',
        price: 0,
        currency: 'usd',
        limit: 10,
      })
    ).body.id as string;
    const ada = (await api('POST', '/v1/sdk/customers', { externalRef: 'ada', email: 'ada@alert.example' }))
      .body.id as string;
    expect((await api('POST', '/v1/sdk/activate', { customerRef: 'ada', planRef: plan })).body.status).toBe(
      'activated',
    );
    for (const threshold of [50, 100])
      expect(
        (await api('POST', '/v1/sdk/alerts', { planRef: plan, kind: 'allowance_percent', threshold })).status,
      ).toBe(201);
    expect(
      (await api('POST', '/v1/sdk/alerts', { customerRef: 'ada', kind: 'allowance_percent', threshold: 80 }))
        .status,
    ).toBe(201);

    const meter = {
      providerId: provider.id,
      environment: 'sandbox' as const,
      meterRef: (await api('GET', '/v1/ui/meters/requests')).body.id as string,
      meterName: 'requests',
    };
    /** `n` admitted calls of ada's, now. */
    const calls = (n: number) =>
      harness.store.store.insert(
        Array.from({ length: n }, () =>
          callRecord(meter, ada, clock.now().toISOString(), {
            outcome: 'success',
            admitted: true,
            productId: product,
            tool: 'search',
          }),
        ),
      );
    const fired = async () =>
      ((await api('GET', '/v1/events?type=customer.alert_triggered&limit=100')).body.data as Json[])
        .map((e) => e.data.object)
        .map((o) => `${o.kind}:${o.threshold}:${o.value}`)
        .sort();
    /** Five evaluations at once, as replicas' passes may race: each crossing is announced once. */
    const pass = async () => {
      await Promise.all(Array.from({ length: 5 }, () => harness.controlPlane.care.alerts.runDue()));
    };

    await calls(4);
    await pass();
    expect(await fired()).toEqual([]);
    await calls(1); // 5 of 10: 50 %
    await pass();
    expect(await fired()).toEqual(['allowance_percent:50:50']);
    await calls(3); // 8: 80 %
    await pass();
    await calls(2); // 10: 100 %
    await pass();
    expect(await fired()).toEqual([
      'allowance_percent:100:100',
      'allowance_percent:50:50',
      'allowance_percent:80:80',
    ]);
    expect(mailbox.countFor('ada@alert.example')).toBe(3);
    expect(await mailbox.textFor('ada@alert.example', 2)).toContain('You have used 100% of your allowance');

    // The next month: the purchase renews, its period starts again, and so do the alerts.
    clock.set(new Date('2026-04-01T00:00:30.000Z'));
    await harness.controlPlane.scheduler.runDue();
    const renewed = (await api('GET', '/v1/sdk/purchases?customerRef=ada')).body.data[0] as Json;
    expect(renewed.periodStart).toBe('2026-04-01T00:00:00.000Z');
    clock.set(new Date('2026-04-02T10:00:00.000Z'));
    await calls(6);
    await pass();
    expect((await fired()).filter((f) => f === 'allowance_percent:50:60')).toHaveLength(1);
    expect(await fired()).toHaveLength(4);
    expect(mailbox.countFor('ada@alert.example')).toBe(4);
  });

  it('fire a spend alert once per period, when the period’s price and usage reach it', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Spend Co' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    const product = (await api('POST', '/v1/ui/products', { name: 'Maps' })).body.id as string;
    const plan = (
      await api('POST', `/v1/ui/products/${product}/plans`, {
        name: 'Hybrid',
        type: 'hybrid',
        billingCycle: 'monthly',
        basePrice: 1000,
        unitAmount: 10,
        currency: 'usd',
      })
    ).body.id as string;
    const cy = (await api('POST', '/v1/sdk/customers', { externalRef: 'cy', email: 'cy@alert.example' })).body
      .id as string;
    await api('POST', '/v1/sdk/customers/cy/payment-methods', {
      card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
    });
    expect((await api('POST', '/v1/sdk/activate', { customerRef: 'cy', planRef: plan })).body.status).toBe(
      'activated',
    );
    // $15.00: the $10.00 price paid for the period plus 50 calls at 10¢.
    const alert = await api('POST', '/v1/sdk/alerts', {
      customerRef: 'cy',
      kind: 'spend_amount',
      threshold: 1500,
    });
    expect(alert.status).toBe(201);
    const meter = {
      providerId: provider.id,
      environment: 'sandbox' as const,
      meterRef: (await api('GET', '/v1/ui/meters/requests')).body.id as string,
      meterName: 'requests',
    };
    const calls = (n: number) =>
      harness.store.store.insert(
        Array.from({ length: n }, () =>
          callRecord(meter, cy, clock.now().toISOString(), {
            outcome: 'success',
            admitted: true,
            productId: product,
          }),
        ),
      );
    const fired = async () =>
      ((await api('GET', '/v1/events?type=customer.alert_triggered&limit=100')).body.data as Json[])
        .map((e) => e.data.object)
        .filter((o) => o.customer === cy)
        .map((o) => `${o.kind}:${o.threshold}:${o.value}:${o.currency}`);
    const pass = () =>
      Promise.all(Array.from({ length: 5 }, () => harness.controlPlane.care.alerts.runDue()));

    clock.set(new Date('2026-03-10T00:00:00.000Z'));
    await calls(49); // $14.90
    await pass();
    expect(await fired()).toEqual([]);
    await calls(1); // $15.00
    await pass();
    await pass();
    expect(await fired()).toEqual(['spend_amount:1500:1500:usd']);
    expect(mailbox.countFor('cy@alert.example')).toBe(1);
    expect(await mailbox.textFor('cy@alert.example')).toContain(
      'You have spent $15.00 this period, reaching the $15.00 of your alert.',
    );

    // April: renewed (the price paid again), the spend starts from the price, the alert again once.
    clock.set(new Date('2026-04-01T00:10:00.000Z'));
    await harness.controlPlane.scheduler.runDue();
    clock.set(new Date('2026-04-03T00:00:00.000Z'));
    await calls(60); // $16.00
    await pass();
    expect(await fired()).toEqual(['spend_amount:1500:1600:usd', 'spend_amount:1500:1500:usd']);
    expect(mailbox.countFor('cy@alert.example')).toBe(2);

    // Only plans that price usage, and an amount of at least one cent.
    const flat = (
      await api('POST', `/v1/ui/products/${product}/plans`, {
        name: 'Flat',
        type: 'recurring',
        billingCycle: 'monthly',
        price: 500,
      })
    ).body.id as string;
    for (const body of [
      { planRef: flat, kind: 'spend_amount', threshold: 100 },
      { customerRef: 'cy', kind: 'spend_amount', threshold: 0 },
    ])
      expect((await api('POST', '/v1/sdk/alerts', body)).status, JSON.stringify(body)).toBe(400);
  });

  it('fire a credit balance alert once per funding, and refuse bad alerts', async () => {
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Credit Co' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    await api('POST', '/v1/sdk/customers', { externalRef: 'bob', email: 'bob@alert.example' });
    await api('POST', '/v1/sdk/customers/bob/credits', { kind: 'grant', amount: 30 });
    const alert = await api('POST', '/v1/sdk/alerts', {
      customerRef: 'bob',
      kind: 'credit_balance',
      threshold: 10,
    });
    expect(alert.body).toMatchObject({ kind: 'credit_balance', threshold: 10, planRef: null });
    const fired = async () =>
      ((await api('GET', '/v1/events?type=customer.alert_triggered&limit=100')).body.data as Json[]).length;
    await harness.controlPlane.care.alerts.runDue();
    expect(await fired()).toBe(0);
    await api('POST', '/v1/sdk/customers/bob/credits', { kind: 'debit', amount: 25 }); // 5 left
    await harness.controlPlane.care.alerts.runDue();
    await api('POST', '/v1/sdk/customers/bob/credits', { kind: 'debit', amount: 2 }); // still low: once
    await harness.controlPlane.care.alerts.runDue();
    expect(await fired()).toBe(1);
    expect(await mailbox.textFor('bob@alert.example')).toContain('Your credit balance is 5 credits');
    // Funded again and drawn down again: a new period, a new alert.
    await api('POST', '/v1/sdk/customers/bob/credits', { kind: 'grant', amount: 20 }); // 23
    await api('POST', '/v1/sdk/customers/bob/credits', { kind: 'debit', amount: 20 }); // 3
    await harness.controlPlane.care.alerts.runDue();
    expect(await fired()).toBe(2);
    expect(mailbox.countFor('bob@alert.example')).toBe(2);

    // A crash between the firing's commit and its mail leaves the mail unsent with its lease
    // taken: five minutes on, one of five racing passes sends it, once.
    const bobs = (await api('GET', '/v1/sdk/customers/bob')).body.id as string;
    const crashed = await harness.pool.query(
      `UPDATE usage_alert_firings SET mailed_at = NULL, mail_attempt_at = fired_at
        WHERE customer_id = $1
          AND period_key = (SELECT max(period_key) FROM usage_alert_firings WHERE customer_id = $1)
        RETURNING mail_subject`,
      [bobs],
    );
    expect(crashed.rows).toEqual([{ mail_subject: 'Credit Co: your credits are running low' }]);
    await harness.controlPlane.care.alerts.runDue();
    expect(mailbox.countFor('bob@alert.example')).toBe(2);
    clock.advance(5 * 60_000 + 1);
    await Promise.all(Array.from({ length: 5 }, () => harness.controlPlane.care.alerts.runDue()));
    expect(mailbox.countFor('bob@alert.example')).toBe(3);
    expect(await mailbox.textFor('bob@alert.example', 2)).toContain('Your credit balance is 3 credits');
    const unsent = await harness.pool.query(
      'SELECT 1 FROM usage_alert_firings WHERE customer_id = $1 AND mailed_at IS NULL',
      [bobs],
    );
    expect(unsent.rowCount).toBe(0);

    const refused = async (body: unknown) => (await api('POST', '/v1/sdk/alerts', body)).body;
    expect(await refused({ customerRef: 'bob', kind: 'credit_balance', threshold: 10 })).toMatchObject({
      code: 'alert_exists',
    });
    expect((await refused({ kind: 'credit_balance', threshold: 10 })).code).toBe('validation_failed');
    expect(
      (await refused({ customerRef: 'bob', planRef: 'pln_x', kind: 'credit_balance', threshold: 1 })).code,
    ).toBe('validation_failed');
    expect((await refused({ customerRef: 'bob', kind: 'allowance_percent', threshold: 0 })).code).toBe(
      'validation_failed',
    );
    expect((await refused({ customerRef: 'bob', kind: 'allowance_percent', threshold: 1001 })).code).toBe(
      'validation_failed',
    );
    expect((await refused({ customerRef: 'bob', kind: 'credit_balance', threshold: -1 })).code).toBe(
      'validation_failed',
    );
    expect((await refused({ customerRef: 'bob', kind: 'spend', threshold: 1 })).code).toBe(
      'validation_failed',
    );
    expect((await refused({ customerRef: 'nobody', kind: 'credit_balance', threshold: 1 })).code).toBe(
      'customer_not_found',
    );
    expect((await refused({ planRef: 'pln_nope', kind: 'credit_balance', threshold: 1 })).code).toBe(
      'plan_not_found',
    );
    expect((await api('GET', '/v1/sdk/alerts?customerRef=bob')).body.data).toHaveLength(1);
    expect((await api('DELETE', `/v1/sdk/alerts/${alert.body.id}`)).body).toEqual({
      id: alert.body.id,
      deleted: true,
    });
    expect((await api('DELETE', `/v1/sdk/alerts/${alert.body.id}`)).body.code).toBe('alert_not_found');
  });
});
