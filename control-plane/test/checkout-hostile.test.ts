import { describe, expect, it } from 'vitest';
import { portalSuite } from '../../test/helpers/portal-shop';

/**
 * The hosted checkout page's calls, sent hostile (docs/checkout.md): anyone holding a session's
 * link can call them. A promotion code, and each part of the billing details and the card, is
 * sent in turn as text with a NUL, control characters, an emoji, a long string, numbers out of
 * any range, and values of the wrong type: each is answered 200 or a 4xx with a machine code,
 * never a 5xx, and the session is still paid by a sane request afterwards.
 */
const { harnessOf, shop } = portalSuite(new Date('2026-03-01T00:00:00.000Z'));

const HOSTILE: readonly unknown[] = [
  '',
  ' ',
  'a\u0000b',
  '\u0001\u001f',
  'Zoë 😀',
  'x'.repeat(10_000),
  -1,
  Number.MAX_VALUE,
  2 ** 64,
  null,
  {},
  [],
  true,
];

describe('hostile calls of the hosted checkout page', () => {
  it('answers each with a result or a 4xx, never a 5xx, and still takes a sane payment', async () => {
    const s = await shop('Hostile Checkout Co');
    await s.customer('ada', false);
    await s.api('POST', '/v1/sdk/coupons', {
      name: 'Launch',
      code: 'LAUNCH',
      percentOff: 10,
      duration: 'once',
    });
    const session = (
      await s.api('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'ada',
        planRef: s.pro,
        allowPromotionCodes: true,
        billingAddressCollection: 'required',
        taxIdCollection: { enabled: true },
      })
    ).body;
    expect(session.id).toBeDefined();
    const call = async (path: string, body: unknown) => {
      const answer = await harnessOf().controlPlane.app.inject({
        method: 'POST',
        url: `/checkout/${session.id}/${path}`,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      return { status: answer.statusCode, body: answer.json() as Record<string, unknown> };
    };
    const failures: string[] = [];
    const judge = (what: string, answer: { status: number; body: Record<string, unknown> }) => {
      if (answer.status >= 500 || (answer.status >= 400 && typeof answer.body.code !== 'string'))
        failures.push(`${what}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 160)}`);
    };
    for (const code of [...HOSTILE, 'LAUNCH\u0000', 'launch', "' OR 1=1 --"])
      judge(`code ${JSON.stringify(code).slice(0, 20)}`, await call('promotion-code', { code }));

    // A card refused at the sandbox's processor: each try is a payment attempt, not what is judged.
    const card = { number: '4000000000000002', expMonth: 12, expYear: 2035, cvc: '123' };
    const billing = {
      address: { line1: '1 Main St', city: 'Berlin', postalCode: '10115', country: 'DE' },
      taxId: { type: 'eu_vat', value: 'DE123456789' },
    };
    const parts: Array<[string, (v: unknown) => unknown]> = [
      ...(['number', 'expMonth', 'expYear', 'cvc'] as const).map((k): [string, (v: unknown) => unknown] => [
        `card.${k}`,
        (v) => ({ card: { ...card, [k]: v }, billing }),
      ]),
      ...(['line1', 'line2', 'city', 'state', 'postalCode', 'country'] as const).map(
        (k): [string, (v: unknown) => unknown] => [
          `billing.address.${k}`,
          (v) => ({ card, billing: { ...billing, address: { ...billing.address, [k]: v } } }),
        ],
      ),
      ...(['type', 'value'] as const).map((k): [string, (v: unknown) => unknown] => [
        `billing.taxId.${k}`,
        (v) => ({ card, billing: { ...billing, taxId: { ...billing.taxId, [k]: v } } }),
      ]),
      ['billing', (v) => ({ card, billing: v })],
      ['card', (v) => ({ card: v, billing })],
    ];
    for (const [part, body] of parts)
      for (const value of HOSTILE)
        judge(`${part} ${JSON.stringify(value)?.slice(0, 20)}`, await call('pay', body(value)));
    expect(failures).toEqual([]);

    // Still payable as it should be.
    const paid = await call('pay', { card: { ...card, number: '4242424242424242' }, billing });
    expect(paid.status).toBe(200);
  }, 600_000);
});
