import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * MAIL_TO_LOG on and no SMTP_URL (what `npm start` on embedded defaults runs): billing mail to
 * customers is written to the log, and the API and console say `logged`, never `sent`.
 */
let harness: TestControlPlane;
const lines: string[] = [];

beforeAll(async () => {
  harness = await startTestControlPlane({
    bodyLimitBytes: 1024 * 1024,
    mailToLog: true,
    logger: pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) }),
  });
});
afterAll(() => harness?.close());

describe('customer mail written to the log', () => {
  it('is logged, and listed as logged with its address and time, never as sent', async () => {
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Logged Co' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    expect((await api('PATCH', '/v1/sdk/customer-emails', { receipts: true })).status).toBe(200);
    const product = (await api('POST', '/v1/ui/products', { name: 'Tools' })).body;
    const plan = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Pro',
        type: 'recurring',
        price: 1000,
      })
    ).body;
    const customer = (await api('POST', '/v1/sdk/customers', { email: 'ada@logged.example' })).body;
    await api('POST', `/v1/sdk/customers/${customer.reference}/payment-methods`, {
      card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
    });
    const activation = await api('POST', '/v1/sdk/activate', {
      customerRef: customer.reference,
      planRef: plan.id,
    });
    expect(activation.body.status).toBe('activated');
    await harness.controlPlane.scheduler.runDue();
    const mails = (await api('GET', `/v1/sdk/customer-emails/messages?customerRef=${customer.reference}`))
      .body.data as Array<Record<string, unknown>>;
    expect(mails).toHaveLength(1);
    expect(mails[0]).toMatchObject({ kind: 'receipt', status: 'logged', to: 'ada@logged.example' });
    expect(mails[0]?.sentAt).toEqual(expect.any(String));
    expect(lines.join('\n')).toContain('receipt for your payment of $10.00');
  });
});
