import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { portalPage } from '../../test/helpers/portal-shop';
import { type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import { connect, eventMaker, type Json, liveSeller, payingCustomer } from '../../test/helpers/stripe-seller';
import { MovableClock } from '../src/clock';

/**
 * Tax ID verification read back from Stripe (docs/payments.md): Stripe checks a customer's tax
 * IDs against their registries (VIES, HMRC, the ABR) and reports each result as
 * `customer.tax_id.created` / `.updated`; the customer's tax ID of the same kind and number keeps
 * it, shown by the API and announced as customer.updated. Events come in any order, signed as
 * Stripe signs them, built on stripe-mock's own tax_id fixture.
 */
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));
let fixtures: Record<string, Json> = {};
const event = eventMaker(clock, () => fixtures);

describe('tax ID verification from Stripe', () => {
  let harness: TestControlPlane;
  let mock: StripeMock;

  beforeAll(async () => {
    mock = await startStripeMock({ payments: 'succeed' });
    fixtures = mock.fixtures;
    harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, stripeApiUrl: mock.url });
  }, 600_000);
  afterAll(async () => {
    await harness?.close();
    await mock?.close();
  });

  /** A live customer with a card at Stripe and two tax IDs: its Stripe customer (cus_…) too. */
  async function customerWithTaxIds(name: string) {
    const s = await liveSeller(harness, name);
    await connect(s);
    const before = mock.requests.length;
    const { customer } = await payingCustomer(s);
    const stripeCustomer = mock.requests
      .slice(before)
      .find((r) => r.method === 'POST' && r.path === '/v1/customers')?.answered as string;
    expect(stripeCustomer).toMatch(/^cus_/);
    const patched = await s.live('PATCH', `/v1/sdk/customers/${customer}`, {
      taxIds: [
        { type: 'eu_vat', value: 'DE 123 456 789' },
        { type: 'gb_vat', value: 'GB123456789' },
      ],
    });
    expect(patched.status).toBe(200);
    const taxIdEvent = (type: string, value: string, verification: Json | null, extra: Json = {}): Json =>
      event(type, 'tax_id', { customer: stripeCustomer, type: 'eu_vat', value, verification, ...extra });
    return { s, customer, stripeCustomer, taxIdEvent };
  }

  it('keeps what the registry found on the tax ID, announced once, the latest report winning', async () => {
    const { s, customer, taxIdEvent } = await customerWithTaxIds('Verified Co');
    const pending = taxIdEvent('customer.tax_id.created', 'DE123456789', {
      status: 'pending',
      verified_name: null,
      verified_address: null,
    });
    expect((await s.post(pending)).body).toMatchObject({ received: true, outcome: 'applied' });
    let taxIds = (await s.live('GET', `/v1/sdk/customers/${customer}`)).body.taxIds as Json[];
    expect(taxIds).toEqual([
      {
        type: 'eu_vat',
        value: 'DE123456789',
        verification: {
          status: 'pending',
          verifiedName: null,
          verifiedAddress: null,
          updatedAt: '2026-06-01T09:00:00.000Z',
        },
      },
      { type: 'gb_vat', value: 'GB123456789', verification: null },
    ]);

    // Verified a minute later, with the registry's name and address (control characters dropped).
    clock.advance(60_000);
    const verified = taxIdEvent('customer.tax_id.updated', 'DE 123.456.789', {
      status: 'verified',
      verified_name: 'Acme GmbH',
      verified_address: 'Hauptstr. 1\n10115 Berlin',
    });
    expect((await s.post(verified)).body.outcome).toBe('applied');
    // A redelivery, and the older pending report arriving late, change nothing.
    expect((await s.post(verified)).body.outcome).toBe('duplicate');
    expect((await s.post({ ...pending, id: `${pending.id}_late` })).body.outcome).toBe('applied');
    taxIds = (await s.live('GET', `/v1/sdk/customers/${customer}`)).body.taxIds as Json[];
    expect(taxIds[0]?.verification).toEqual({
      status: 'verified',
      verifiedName: 'Acme GmbH',
      verifiedAddress: 'Hauptstr. 1 10115 Berlin',
      updatedAt: '2026-06-01T09:01:00.000Z',
    });
    const updates = (await s.events('customer.updated')).map((e) => e.object.taxIds[0]?.verification?.status);
    expect(updates.slice(-2)).toEqual(['pending', 'verified']);
    // The customer's portal says so beside the ID.
    const portal = await portalPage(harness, s.live, customer);
    expect(portal).toContain('EU VAT DE123456789 (verified in the tax registry)');
    expect(portal).not.toContain('GB123456789 (verified');

    // The list sent again, with one more: the verified ID keeps what the registry said.
    const patched = await s.live('PATCH', `/v1/sdk/customers/${customer}`, {
      taxIds: [
        { type: 'eu_vat', value: 'DE123456789' },
        { type: 'gb_vat', value: 'GB123456789' },
        { type: 'us_ein', value: '12-3456789' },
      ],
    });
    expect(patched.body.taxIds.map((t: Json) => t.verification?.status ?? null)).toEqual([
      'verified',
      null,
      null,
    ]);
    // Removed and added again, it is a new ID: nothing verified until Stripe says so.
    await s.live('PATCH', `/v1/sdk/customers/${customer}`, { taxIds: [] });
    const again = await s.live('PATCH', `/v1/sdk/customers/${customer}`, {
      taxIds: [{ type: 'eu_vat', value: 'DE123456789' }],
    });
    expect(again.body.taxIds).toEqual([{ type: 'eu_vat', value: 'DE123456789', verification: null }]);
  });

  it('changes nothing for an ID the customer does not hold, a Stripe customer not ours, or a bad report', async () => {
    const { s, customer, taxIdEvent } = await customerWithTaxIds('Unmatched Co');
    const verified = { status: 'verified', verified_name: 'X', verified_address: null };
    const cases: Array<[Json, string]> = [
      [taxIdEvent('customer.tax_id.updated', 'DE999999999', verified), 'unmatched:tax_id'],
      [taxIdEvent('customer.tax_id.updated', 'DE123456789', null), 'ignored'],
      [taxIdEvent('customer.tax_id.updated', 'DE123456789', { ...verified, status: 'rejected' }), 'ignored'],
      [taxIdEvent('customer.tax_id.updated', 'DE123456789', verified, { type: 'xx_tin' }), 'ignored'],
      [
        taxIdEvent('customer.tax_id.updated', 'DE123456789', verified, { customer: null }),
        'unmatched:customer',
      ],
      [
        taxIdEvent('customer.tax_id.updated', 'DE123456789', verified, { customer: { id: 42 } }),
        'unmatched:customer',
      ],
      // Signed but malformed: refused as such and acknowledged, never a 500.
      [
        { ...taxIdEvent('customer.tax_id.updated', 'DE123456789', verified), data: { object: null } },
        'refused:malformed',
      ],
      [{ ...taxIdEvent('customer.tax_id.created', 'DE123456789', verified), data: {} }, 'refused:malformed'],
    ];
    for (const [sent, outcome] of cases) {
      const answer = await s.post(sent);
      expect(answer.status, JSON.stringify(sent.data)).toBe(200);
      expect(answer.body.outcome, JSON.stringify(sent.data)).toBe(outcome);
    }
    // Another provider's Stripe customer: its events reach that provider's endpoint only.
    const other = await customerWithTaxIds('Other Co');
    expect(
      (await s.post(other.taxIdEvent('customer.tax_id.updated', 'DE123456789', verified))).body.outcome,
    ).not.toBe('applied');
    const taxIds = (await s.live('GET', `/v1/sdk/customers/${customer}`)).body.taxIds as Json[];
    expect(taxIds.map((t) => t.verification)).toEqual([null, null]);
  });
});
