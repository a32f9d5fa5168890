import { inflateSync } from 'node:zlib';
import { PDFDocument } from 'pdf-lib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Who a bill is to and from: customers' billing addresses and tax ids and the provider's postal
 * address, checked at the edge, and copied onto each invoice as they stood when it was
 * finalized, so a later change never rewrites a bill already issued. Real PostgreSQL and chdb.
 */
const clock = new MovableClock(new Date('2026-03-01T00:00:00.000Z'));
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

const at = (iso: string) => clock.set(new Date(iso));
const run = () => harness.controlPlane.scheduler.runDue();

async function seller(name: string) {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: name });
  const api = async (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown) => {
    const response = await harness.controlPlane.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${sandboxKey}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: response.statusCode, body: response.json() as Json };
  };
  return { api, provider };
}

/** The text a PDF's content streams draw, as pdfkit writes it: hex strings of WinAnsi bytes. */
function pdfText(pdf: Buffer): string {
  const raw = pdf.toString('latin1');
  let drawn = '';
  for (const match of raw.matchAll(/stream\r?\n([\s\S]*?)\r?\nendstream/g)) {
    let content: string;
    try {
      content = inflateSync(Buffer.from(match[1] ?? '', 'latin1')).toString('latin1');
    } catch {
      continue;
    }
    for (const hex of content.matchAll(/<([0-9a-fA-F]+)>/g))
      drawn += Buffer.from(hex[1] ?? '', 'hex').toString('latin1');
    drawn += '\n';
  }
  return drawn;
}

describe('billing details at the edge', () => {
  it('stores an address and tax ids in their plain form, and refuses a malformed one whole', async () => {
    const s = await seller('Edge checks');
    const created = await s.api('POST', '/v1/sdk/customers', {
      name: 'Grace',
      address: { line1: '  Unter den Linden 1 ', city: 'Berlin 🐻', postalCode: '10117', country: 'de' },
      taxIds: [
        { type: 'eu_vat', value: 'de 123.456-789' },
        { type: 'us_ein', value: '12-3456789' },
      ],
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      address: {
        line1: 'Unter den Linden 1',
        line2: null,
        city: 'Berlin 🐻',
        state: null,
        postalCode: '10117',
        country: 'DE',
      },
      taxIds: [
        { type: 'eu_vat', value: 'DE123456789' },
        { type: 'us_ein', value: '123456789' },
      ],
    });
    const ref = created.body.reference as string;

    // Each is refused with the part at fault named, and the customer is left as it was.
    const refusals: Array<[unknown, string]> = [
      [{ taxIds: [{ type: 'eu_vat', value: '123' }] }, '/taxIds/0/value'],
      [{ taxIds: [{ type: 'gb_vat', value: 'DE123456789' }] }, '/taxIds/0/value'],
      [
        {
          taxIds: [
            { type: 'eu_vat', value: 'DE123456789' },
            { type: 'eu_vat', value: 'de 123456789' },
          ],
        },
        '/taxIds/1',
      ],
      [{ taxIds: [{ type: 'xx_vat', value: '1' }] }, '/taxIds/0/type'],
      [
        { taxIds: Array.from({ length: 6 }, (_, i) => ({ type: 'au_abn', value: `1234567890${i}` })) },
        '/taxIds',
      ],
      [{ address: { country: 'XX' } }, '/address/country'],
      [{ address: { country: 'EU' } }, '/address/country'],
      [{ address: {} }, '/address'],
      [{ address: { line1: 'line\nbreak' } }, '/address/line1'],
      [{ address: { line1: '   ' } }, '/address/line1'],
      [{ address: { line1: 'x'.repeat(201) } }, '/address/line1'],
      [{ address: { street: 'Main' } }, '/address'],
      [{ address: 'Berlin' }, '/address'],
      [{ address: { city: 'A\u0000B' } }, '/address/city'],
    ];
    for (const [patch, path] of refusals) {
      const refused = await s.api('PATCH', `/v1/sdk/customers/${ref}`, patch);
      expect(refused.status, JSON.stringify(patch)).toBe(400);
      expect(refused.body.code).toBe('validation_failed');
      expect(JSON.stringify(refused.body.errors), JSON.stringify(patch)).toContain(`"${path}`);
    }
    const creating = await s.api('POST', '/v1/sdk/customers', {
      externalRef: 'never-made',
      taxIds: [{ type: 'in_gst', value: 'nope' }],
    });
    expect(creating.status).toBe(400);
    expect((await s.api('GET', '/v1/sdk/customers/never-made')).status).toBe(404);
    expect((await s.api('GET', `/v1/sdk/customers/${ref}`)).body).toMatchObject({
      address: created.body.address,
      taxIds: created.body.taxIds,
    });

    // An address given replaces the last; null and [] clear; customer.updated says what was.
    const moved = await s.api('PATCH', `/v1/sdk/customers/${ref}`, {
      address: { line1: '1 Main St', city: 'Springfield', state: 'IL', country: 'US' },
    });
    expect(moved.body.address).toEqual({
      line1: '1 Main St',
      line2: null,
      city: 'Springfield',
      state: 'IL',
      postalCode: null,
      country: 'US',
    });
    expect(moved.body.taxIds).toHaveLength(2);
    const cleared = await s.api('PATCH', `/v1/sdk/customers/${ref}`, { address: null, taxIds: [] });
    expect(cleared.body).toMatchObject({ address: null, taxIds: [] });
    const { rows } = await harness.pool.query<{ payload: Json }>(
      `SELECT payload FROM outbox_events WHERE provider_id = $1 AND type = 'customer.updated' ORDER BY created_at, id`,
      [s.provider.id],
    );
    const last = rows.at(-1)?.payload.data;
    expect(last.object).toMatchObject({ id: ref, address: null, taxIds: [] });
    expect(last.previous_attributes ?? last.previousAttributes).toEqual({
      address: moved.body.address,
      taxIds: moved.body.taxIds,
    });

    // The merchant's postal address: checked the same way, answered with the identity.
    expect((await s.api('PATCH', '/v1/sdk/merchant', { address: { country: 'ZZ' } })).status).toBe(400);
    const merchant = await s.api('PATCH', '/v1/sdk/merchant', {
      address: { line1: '10 Downing St', city: 'London', postalCode: 'SW1A 2AA', country: 'gb' },
    });
    expect(merchant.status).toBe(200);
    expect(merchant.body.address).toMatchObject({ line1: '10 Downing St', country: 'GB', line2: null });
    expect((await s.api('GET', '/v1/sdk/merchant')).body.address.city).toBe('London');
  });
});

describe('billing details on invoices', () => {
  it('keeps the details an invoice was finalized with, while a draft follows the customer', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Issuer <Ltd>');
    await s.api('PATCH', '/v1/sdk/merchant', {
      legalName: 'Issuer Holdings Ltd',
      companyNumber: '01234567',
      vatNumber: 'GB987654321',
      address: { line1: '1 High St', city: 'Leeds', postalCode: 'LS1 1AA', country: 'GB' },
    });
    const product = (await s.api('POST', '/v1/ui/products', { name: 'Tools' })).body;
    const plan = (
      await s.api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Hybrid',
        billingCycle: 'monthly',
        type: 'hybrid',
        basePrice: 500,
        unitAmount: 1,
      })
    ).body;
    const customer = (
      await s.api('POST', '/v1/sdk/customers', {
        name: 'Ada <b>Lovelace</b>',
        email: 'ada@example.com',
        address: { line1: '12 Old Rd', city: 'Bath', postalCode: 'BA1 1AA', country: 'GB' },
        taxIds: [{ type: 'gb_vat', value: 'GB 123 456 789' }],
      })
    ).body;
    const ref = customer.reference as string;
    expect(
      (
        await s.api('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
          card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
        })
      ).status,
    ).toBe(201);
    const activation = await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: plan.id });
    const purchase = activation.body.purchaseRef as string;
    const invoices = async () =>
      (await s.api('GET', `/v1/sdk/invoices?purchaseRef=${purchase}&limit=100`)).body.data as Json[];

    const [first] = await invoices();
    expect(first).toMatchObject({
      billingReason: 'first_payment',
      customerName: 'Ada <b>Lovelace</b>',
      customerEmail: 'ada@example.com',
      customerAddress: { line1: '12 Old Rd', city: 'Bath', country: 'GB' },
      customerTaxIds: [{ type: 'gb_vat', value: 'GB123456789' }],
      issuer: {
        legalName: 'Issuer Holdings Ltd',
        companyNumber: '01234567',
        vatNumber: 'GB987654321',
        taxId: null,
        address: { line1: '1 High St', city: 'Leeds' },
      },
    });

    // The customer moves and the provider changes its VAT number: the issued invoice stands.
    await s.api('PATCH', `/v1/sdk/customers/${ref}`, {
      address: { line1: '7 New St', city: 'York', country: 'GB' },
      taxIds: [{ type: 'gb_vat', value: 'GB111222333' }],
    });
    await s.api('PATCH', '/v1/sdk/merchant', { vatNumber: 'GB555666777' });
    expect((await s.api('GET', `/v1/sdk/invoices/${first?.id}`)).body).toMatchObject({
      customerAddress: { line1: '12 Old Rd' },
      customerTaxIds: [{ value: 'GB123456789' }],
      issuer: { vatNumber: 'GB987654321' },
    });

    // The period closes: its invoice waits as a draft through the lateness allowance, with the
    // details as they are at each recount, and keeps the last ones once finalized.
    await s.api('POST', '/v1/sdk/usages', { customerRef: ref, productRef: product.id, units: 3 });
    await harness.settled();
    at('2026-04-01T00:00:01.000Z');
    await run();
    const draft = (await invoices()).find((invoice) => invoice.status === 'draft');
    expect(draft).toMatchObject({
      customerAddress: { line1: '7 New St' },
      issuer: { vatNumber: 'GB555666777' },
    });
    await s.api('PATCH', `/v1/sdk/customers/${ref}`, { address: { line1: '9 Last Ln', country: 'IE' } });
    at('2026-04-01T00:02:00.000Z');
    await run();
    expect((await s.api('GET', `/v1/sdk/invoices/${draft?.id}`)).body).toMatchObject({
      status: 'draft',
      customerAddress: { line1: '9 Last Ln', country: 'IE', city: null },
    });
    // The charge at finalizing fails; paid after the customer moved again, it is still the bill
    // it was issued as (paying it writes the invoice, and the copy stays).
    const card = (number: string) =>
      s.api('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
        card: { number, expMonth: 12, expYear: 2035, cvc: '123' },
      });
    expect((await card(SANDBOX_CARDS.failsLater)).status).toBe(201);
    at('2026-04-01T00:06:00.000Z');
    await run();
    const closed = (await s.api('GET', `/v1/sdk/invoices/${draft?.id}`)).body;
    expect(closed).toMatchObject({ status: 'open', total: 503, customerAddress: { line1: '9 Last Ln' } });
    await s.api('PATCH', `/v1/sdk/customers/${ref}`, { address: null, name: 'Someone Else' });
    await s.api('PATCH', '/v1/sdk/merchant', { legalName: 'Renamed Ltd' });
    expect((await card(SANDBOX_CARDS.succeeds)).status).toBe(201);
    expect((await s.api('POST', `/v1/sdk/invoices/${closed.id}/pay`)).body).toMatchObject({
      status: 'paid',
      customerName: 'Ada <b>Lovelace</b>',
      customerAddress: { line1: '9 Last Ln' },
      issuer: { legalName: 'Issuer Holdings Ltd' },
    });

    // The customer's copy, page and PDF, names both parties as the invoice does, even once the
    // customer is deleted.
    expect((await s.api('DELETE', `/v1/sdk/customers/${ref}`)).status).toBe(200);
    const path = new URL(first?.hostedUrl).pathname;
    const page = await harness.controlPlane.app.inject({ method: 'GET', url: path });
    expect(page.statusCode).toBe(200);
    for (const text of [
      'Issuer Holdings Ltd',
      '1 High St<br>Leeds, LS1 1AA<br>United Kingdom',
      'Company number 01234567',
      'VAT GB987654321',
      'Ada &lt;b&gt;Lovelace&lt;/b&gt;<br>ada@example.com<br>12 Old Rd<br>Bath, BA1 1AA<br>United Kingdom<br>GB VAT GB123456789',
    ])
      expect(page.body).toContain(text);
    expect(page.body).not.toContain('7 New St');
    expect(page.body).not.toContain('<b>Lovelace');

    const pdf = await harness.controlPlane.app.inject({ method: 'GET', url: `${path}/pdf` });
    expect(pdf.statusCode).toBe(200);
    expect((await PDFDocument.load(pdf.rawPayload)).getPageCount()).toBe(1);
    const drawn = pdfText(pdf.rawPayload);
    for (const text of ['GB123456789', 'GB987654321', '01234567', 'BA1 1AA', 'LS1 1AA'])
      expect(drawn.replace(/\n/g, '')).toContain(text);
    expect(drawn).not.toContain('7 New St');
  });
});
