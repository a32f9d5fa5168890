import { afterAll, beforeAll } from 'vitest';
import { MovableClock } from '../../control-plane/src/clock';
import { SANDBOX_CARDS } from '../../control-plane/src/modules/payments/processor';
import { injectClient, startTestControlPlane, type TestControlPlane } from './control-plane';
import { startMailbox } from './mailbox';

/**
 * A test file's control plane on real PostgreSQL, on a movable clock starting at `start`, started
 * before its tests and closed after them, with the portal's pages (`portalPages`) on it; with
 * `mail`, over real SMTP to a mailbox on loopback.
 */
export function portalSuite(start: Date, options: { mail?: boolean } = {}) {
  const clock = new MovableClock(start);
  let harness: TestControlPlane | undefined;
  let mailbox: Awaited<ReturnType<typeof startMailbox>> | undefined;
  beforeAll(async () => {
    // With `mail`, an SMTP mailbox on loopback takes what the portal mails (codes to an address).
    if (options.mail === true) mailbox = await startMailbox();
    harness = await startTestControlPlane({
      bodyLimitBytes: 1024 * 1024,
      clock,
      ...(mailbox === undefined ? {} : { smtpUrl: mailbox.url }),
    });
  });
  afterAll(async () => {
    await harness?.close();
    await mailbox?.close();
  });
  const harnessOf = () => {
    if (harness === undefined) throw new Error('the control plane is not started yet');
    return harness;
  };
  return { clock, harnessOf, ...portalPages(harnessOf) };
}

/**
 * A provider with a product of two monthly plans (Basic and Pro, large prices so that minutes
 * move a switch's credit by many cents), its customers, and their portal sign-in: what the
 * portal's tests drive through the portal's own pages, in the control plane of the harness that
 * `harnessOf` answers when called (a test file's, started in its `beforeAll`).
 */
export function portalPages(harnessOf: () => TestControlPlane) {
  const get = (url: string, cookie: string) =>
    harnessOf().controlPlane.app.inject({ method: 'GET', url, headers: { cookie } });
  const post = (url: string, form: Record<string, string>, cookie: string) =>
    harnessOf().controlPlane.app.inject({
      method: 'POST',
      url,
      payload: new URLSearchParams(form).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    });
  return { get, post, shop: (name: string) => portalShop(harnessOf(), get, name) };
}

/** An API client of the provider's, as much as making a portal link needs. */
type LinkMaker = (method: 'POST', url: string, body: unknown) => Promise<{ body: Record<string, unknown> }>;

/** The portal cookie of a customer who opened the link the provider's key behind `api` made. */
export async function portalCookie(
  harness: TestControlPlane,
  api: LinkMaker,
  customerRef: string,
): Promise<string> {
  const link = (await api('POST', '/v1/sdk/portal-sessions', { customerRef })).body.url as string;
  const opened = await harness.controlPlane.app.inject({ method: 'GET', url: new URL(link).pathname });
  return String(opened.headers['set-cookie']).split(';')[0] ?? '';
}

/** The portal's page as the customer `customerRef` sees it, signed in by a link. */
export async function portalPage(
  harness: TestControlPlane,
  api: LinkMaker,
  customerRef: string,
): Promise<string> {
  const cookie = await portalCookie(harness, api, customerRef);
  return (await harness.controlPlane.app.inject({ method: 'GET', url: '/portal', headers: { cookie } })).body;
}

/** A hidden field's value in a portal page. */
export const hiddenField = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1]?.replaceAll('&amp;', '&') ?? '';

async function portalShop(
  harness: TestControlPlane,
  get: (url: string, cookie: string) => Promise<{ body: string }>,
  name: string,
) {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const product = (await api('POST', '/v1/ui/products', { name: 'Weather' })).body.id as string;
  const plan = async (planName: string, price: number) =>
    (
      await api('POST', `/v1/ui/products/${product}/plans`, {
        name: planName,
        type: 'recurring',
        price,
        billingCycle: 'monthly',
        limit: 1000,
      })
    ).body.id as string;
  const basic = await plan('Basic', 3_000_000);
  const pro = await plan('Pro', 6_000_000);
  const customer = async (ref: string, withCard = true) => {
    const id = (await api('POST', '/v1/sdk/customers', { externalRef: ref, email: `${ref}@example.com` }))
      .body.id as string;
    if (withCard)
      await api('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
        card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
      });
    return id;
  };
  /** A customer `ref` without a card, holding a free monthly plan: its purchase's reference. */
  const cardlessOnFreePlan = async (ref: string) => {
    await customer(ref, false);
    const free = (
      await api('POST', `/v1/ui/products/${product}/plans`, {
        name: 'Free',
        type: 'recurring',
        price: 0,
        billingCycle: 'monthly',
      })
    ).body.id as string;
    return (await api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: free })).body
      .purchaseRef as string;
  };
  const signIn = async (ref: string) => {
    const cookie = await portalCookie(harness, api, ref);
    const csrf = hiddenField((await get('/portal', cookie)).body, 'csrf');
    return { cookie, csrf };
  };
  return { api, provider, product, basic, pro, customer, cardlessOnFreePlan, signIn };
}
