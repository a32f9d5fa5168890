import type { Address, StoredTaxId } from '../../billing-details';
import { brandStyle, escapeHtml } from '../../http/html';
import { formatMoney } from '../checkout/page';
import { renderBillingDetails } from './billing-details-page';
import { renderUsageChart, type UsageChart } from './usage-chart';

/** What the portal page shows a signed-in customer. */
export interface PortalView {
  merchant: {
    displayName: string;
    logoUrl: string | null;
    brandColor: string | null;
    supportEmail: string | null;
  };
  customer: {
    ref: string;
    email: string | null;
    name: string | null;
    telephone: string | null;
    address: Address | null;
    taxIds: StoredTaxId[];
  };
  sandbox: boolean;
  csrfToken: string;
  returnUrl: string | null;
  credits: number;
  plans: Array<{
    purchaseRef: string;
    /** A recurring purchase in force and not already ending: the customer may cancel it at period end. */
    cancellable: boolean;
    /** In force: the customer may change its plan or cancel it now. */
    changeable: boolean;
    productId: string;
    product: string;
    plan: string;
    status: string;
    periodEnd: string | null;
    cancelAtPeriodEnd: boolean;
    /** Its discount in words while it takes money off (docs/coupons.md), else null. */
    discount: string | null;
    /** Usage priced by the period (post-paid): billable calls so far and what they come to. */
    usageSoFar: { calls: number; total: string } | null;
    /** The invoice closing this period (or trial), as of now; null when none charges anything. */
    nextInvoice: {
      at: string;
      total: string;
      advance: string;
      usage: string | null;
      /** Taken off by the purchase's discount (docs/coupons.md), when it applies. */
      discount: string | null;
    } | null;
    /** Calls of this period against the plan's limit (undefined: no limit; null: not readable now). */
    allowance?: { used: number; limit: number; left: number } | null | undefined;
    /** The plan's top-up pack in words ("50 credits for $5.00"), or null when it sells none. */
    pack: string | null;
  }>;
  movements: Array<{ at: string; kind: string; amount: number; balance: number; reason: string | null }>;
  invoices: Array<{ id: string; at: string; status: string; total: string; pdfUrl: string | null }>;
  /**
   * Draft invoices: periods that have ended and whose late usage is still being counted, to the
   * cent so far (the invoice closes with the same lines plus what arrives late).
   */
  upcoming: Array<{ id: string; total: string }>;
  autoTopUp: {
    productRef: string;
    threshold: number;
    packs: number;
    status: string;
    lastFailure: string | null;
  } | null;
  /** The customer's own alerts (the provider's on their plans apply too, and are not listed). */
  alerts: Array<{
    id: string;
    kind: 'allowance_percent' | 'credit_balance' | 'spend_amount';
    threshold: number;
  }>;
  /** The currency the customer pays in: spend alerts are amounts of it. */
  currency: string;
  /** The customer's stored cards, the default first to be charged. */
  cards: Array<{ id: string; text: string; isDefault: boolean }>;
  /** Calls by day and tool this period; null when the usage store cannot be read now. */
  usage: UsageChart | null;
  /** A line above the page: what the last change did, or why it was refused. */
  notice: { kind: 'saved' | 'error'; text: string } | null;
}

/** No script, no third-party asset; forms post to this origin only. */
export const PORTAL_CSP =
  "default-src 'none'; img-src https: http: data:; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const STYLE = `
body{font-family:system-ui,sans-serif;background:#f5f6f8;margin:0;color:#1b1b1f}
main{background:#fff;max-width:720px;margin:32px auto;padding:28px;border-radius:12px;box-shadow:0 2px 12px #0001}
header{display:flex;align-items:center;gap:12px}header img{max-height:40px;max-width:160px}
h1{font-size:20px;margin:0}h2{font-size:16px;margin:28px 0 8px}
table{border-collapse:collapse;width:100%;font-size:14px}th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e4e4e8}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.balance{font-size:28px;font-weight:600}
label{display:block;font-size:13px;color:#444;margin-top:10px}
input,select,textarea{padding:8px;border:1px solid #888;border-radius:6px;font-size:15px}
button{margin-top:14px;padding:10px 16px;border:0;border-radius:6px;background:var(--brand);color:var(--on-brand);font-size:15px}
button.plain{background:none;color:var(--brand-text);text-decoration:underline;padding:0;margin-left:12px}
a{color:var(--brand-text)}
.notice{padding:8px 12px;border-radius:6px;margin:12px 0}.saved{background:#e6f4ea}.error{background:#fde7e9}
form.inline{display:inline}form.inline button{margin:0 0 0 8px}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
.sandbox{background:#fff4cc;padding:6px 10px;border-radius:6px;font-size:13px;margin:12px 0}
ul.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:12px;font-size:13px}.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
.fine{font-size:13px;color:#555}td.n strong{font-weight:600}
footer{margin-top:28px;font-size:13px;display:flex;gap:16px;align-items:center}footer button.plain{margin:0;font-size:13px}
`;

export const shell = (title: string, brand: string | null, body: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>${brandStyle(brand)}${STYLE}</style></head>
<body><main>${body}</main></body></html>`;

export const day = (iso: string | null) => (iso === null ? '—' : iso.slice(0, 10));

export function renderPortal(view: PortalView): string {
  const m = view.merchant;
  const csrf = `<input type="hidden" name="csrf" value="${escapeHtml(view.csrfToken)}">`;
  const who = view.customer.name ?? view.customer.email ?? view.customer.ref;
  const sellsPacks = view.plans.filter((p) => p.pack !== null);
  const allowanceText = (a: PortalView['plans'][number]['allowance']) =>
    a === undefined
      ? '—'
      : a === null
        ? 'not available right now'
        : `${a.used} of ${a.limit} calls used, ${a.left} left`;
  const plans =
    view.plans.length === 0
      ? '<p>You have no plans yet.</p>'
      : `<table><thead><tr><th scope="col">Product</th><th scope="col">Plan</th><th scope="col">Status</th><th scope="col">Renews or ends</th><th scope="col">Allowance this period</th><th scope="col"><span class="sr">Change</span></th></tr></thead><tbody>${view.plans
          .map(
            (p) =>
              `<tr><td>${escapeHtml(p.product)}</td><td>${escapeHtml(p.plan)}${p.discount === null ? '' : `<br><small>${escapeHtml(p.discount)}</small>`}</td><td>${escapeHtml(p.status)}${p.cancelAtPeriodEnd ? ' (cancels at period end)' : ''}</td><td>${day(p.periodEnd)}</td><td>${allowanceText(p.allowance)}</td><td>${
                p.changeable
                  ? `<a href="/portal/change/${escapeHtml(encodeURIComponent(p.purchaseRef))}" aria-label="Change plan: ${escapeHtml(`${p.product}, ${p.plan}`)}">Change plan</a> <a href="/portal/cancel/${escapeHtml(encodeURIComponent(p.purchaseRef))}" aria-label="Cancel: ${escapeHtml(`${p.product}, ${p.plan}`)}">Cancel</a>`
                  : ''
              }${
                p.cancellable
                  ? `<form method="post" action="/portal/cancel">${csrf}<input type="hidden" name="purchaseRef" value="${escapeHtml(p.purchaseRef)}"><button class="plain" type="submit" aria-label="Cancel at period end: ${escapeHtml(`${p.product}, ${p.plan}`)}">Cancel at period end</button></form>`
                  : ''
              }</td></tr>`,
          )
          .join('')}</tbody></table>`;
  const auto = view.autoTopUp;
  const packChoice = (id: string, selected: string | undefined) =>
    `<select id="${id}" name="productRef">${sellsPacks
      .map(
        (p) =>
          `<option value="${escapeHtml(p.productId)}"${selected === p.productId ? ' selected' : ''}>${escapeHtml(`${p.product}: ${p.pack}`)}</option>`,
      )
      .join('')}</select>`;
  const buyForm =
    sellsPacks.length === 0
      ? ''
      : `<form method="post" action="/portal/buy-credits">${csrf}
<label for="buy-product">Buy packs of</label>${packChoice('buy-product', undefined)}
<label for="buy-packs">Packs</label><input id="buy-packs" name="packs" inputmode="numeric" required value="1">
<div><button type="submit">Buy credits</button></div></form>`;
  const topUpForm =
    sellsPacks.length === 0
      ? '<p>None of your plans sells credit packs.</p>'
      : `<form method="post" action="/portal/auto-top-up">
${csrf}
<label for="productRef">Buy packs of</label>
${packChoice('productRef', auto?.productRef)}
<label for="threshold">When my balance falls below (credits)</label>
<input id="threshold" name="threshold" inputmode="numeric" required value="${auto === null ? '' : String(auto.threshold)}">
<label for="packs">Packs to buy each time</label>
<input id="packs" name="packs" inputmode="numeric" required value="${String(auto?.packs ?? 1)}">
<div><button type="submit">Save auto top-up</button>${auto === null ? '' : '<button class="plain" type="submit" name="off" value="1">Turn off</button>'}</div>
</form>`;
  const autoLine =
    auto === null
      ? '<p id="auto-status">Auto top-up is off.</p>'
      : `<p id="auto-status">Auto top-up is ${escapeHtml(auto.status)}: below ${auto.threshold} credits, ${auto.packs} ${auto.packs === 1 ? 'pack' : 'packs'} charged to your default card.${auto.lastFailure === null ? '' : ` The last attempt failed (${escapeHtml(auto.lastFailure)}).`}</p>`;
  const movements =
    view.movements.length === 0
      ? '<p>No credit movements yet.</p>'
      : `<table><thead><tr><th scope="col">Date</th><th scope="col">What</th><th scope="col" class="n">Credits</th><th scope="col" class="n">Balance</th></tr></thead><tbody>${view.movements
          .map(
            (mv) =>
              `<tr><td>${day(mv.at)}</td><td>${escapeHtml(mv.reason ?? mv.kind)}</td><td class="n">${mv.amount > 0 ? '+' : ''}${mv.amount}</td><td class="n">${mv.balance}</td></tr>`,
          )
          .join('')}</tbody></table>`;
  const invoices =
    view.invoices.length === 0
      ? '<p>No invoices yet.</p>'
      : `<table><thead><tr><th scope="col">Date</th><th scope="col">Invoice</th><th scope="col">Status</th><th scope="col" class="n">Total</th></tr></thead><tbody>${view.invoices
          .map(
            (i) =>
              `<tr><td>${day(i.at)}</td><td>${i.pdfUrl === null ? escapeHtml(i.id) : `<a href="${escapeHtml(i.pdfUrl)}">${escapeHtml(i.id)} (PDF)</a>`}</td><td>${escapeHtml(i.status)}${
                i.status === 'open'
                  ? ` <form method="post" action="/portal/invoices/pay" class="inline">${csrf}<input type="hidden" name="id" value="${escapeHtml(i.id)}"><button type="submit" aria-label="Pay now: invoice ${escapeHtml(i.id)}, with your default card">Pay now</button></form>`
                  : ''
              }</td><td class="n">${escapeHtml(i.total)}</td></tr>`,
          )
          .join('')}</tbody></table>`;
  const alertText = (a: PortalView['alerts'][number]) =>
    a.kind === 'allowance_percent'
      ? `When I have used ${a.threshold}% of my allowance`
      : a.kind === 'spend_amount'
        ? `When I have spent ${formatMoney(a.threshold, view.currency)} in a period`
        : `When my credit balance falls below ${a.threshold} credits`;
  const alerts = `${
    view.alerts.length === 0
      ? '<p>You have no alerts of your own. We mail you when one is crossed, once a period.</p>'
      : `<ul>${view.alerts
          .map(
            (a) =>
              `<li>${escapeHtml(alertText(a))} <form method="post" action="/portal/alerts/remove" class="inline">${csrf}<input type="hidden" name="id" value="${escapeHtml(a.id)}"><button class="plain" type="submit" aria-label="Remove alert: ${escapeHtml(alertText(a))}">Remove</button></form></li>`,
          )
          .join('')}</ul>`
  }<form method="post" action="/portal/alerts">${csrf}
<label for="alert-kind">Mail me</label><select id="alert-kind" name="kind"><option value="allowance_percent">when I have used this percent of my allowance</option><option value="credit_balance">when my credit balance falls below this many credits</option><option value="spend_amount">when my spend in a period reaches this amount (${escapeHtml(view.currency.toUpperCase())})</option></select>
<label for="alert-threshold">Threshold</label><input id="alert-threshold" name="threshold" inputmode="numeric" required>
<div><button type="submit">Add alert</button></div></form>`;
  const cards = `${
    view.cards.length === 0
      ? '<p>No card on file.</p>'
      : `<ul id="cards">${view.cards
          .map(
            (c) =>
              `<li>${escapeHtml(c.text)}${c.isDefault ? ' (default)' : ` <form method="post" action="/portal/cards/default" class="inline">${csrf}<input type="hidden" name="id" value="${escapeHtml(c.id)}"><button class="plain" type="submit" aria-label="Make default: ${escapeHtml(c.text)}">Make default</button></form>`} <form method="post" action="/portal/cards/remove" class="inline">${csrf}<input type="hidden" name="id" value="${escapeHtml(c.id)}"><button class="plain" type="submit" aria-label="Remove: ${escapeHtml(c.text)}">Remove</button></form></li>`,
          )
          .join('')}</ul>`
  }<form method="post" action="/portal/cards">${csrf}<div><button type="submit">Add a card</button></div></form>`;
  const c = view.customer;
  const details = `<form method="post" action="/portal/details">${csrf}
<label for="details-name">Name</label><input id="details-name" name="name" autocomplete="name" maxlength="200" value="${escapeHtml(c.name ?? '')}">
<label for="details-telephone">Telephone</label><input id="details-telephone" name="telephone" type="tel" autocomplete="tel" value="${escapeHtml(c.telephone ?? '')}">
<div><button type="submit">Save details</button></div></form>
<p>Email: <strong id="email">${c.email === null ? 'none' : escapeHtml(c.email)}</strong></p>
<p class="fine">Mail about your account goes to this address, and you sign in with it. A new one is yours once you enter the code we mail to it.</p>
<form method="post" action="/portal/email">${csrf}<label for="new-email">New email address</label><input id="new-email" name="email" type="email" autocomplete="email" maxlength="254" required>
<div><button type="submit">Email a code to the new address</button></div></form>
${renderBillingDetails(c, csrf)}`;
  const notice =
    view.notice === null
      ? ''
      : `<div class="notice ${view.notice.kind}" role="status">${escapeHtml(view.notice.text)}</div>`;
  return shell(
    `${m.displayName}: your account`,
    m.brandColor,
    `<header>${m.logoUrl === null ? '' : `<img src="${escapeHtml(m.logoUrl)}" alt="">`}<h1>${escapeHtml(m.displayName)}</h1></header>
<p>Signed in as ${escapeHtml(who)}</p>
${view.sandbox ? '<div class="sandbox">Sandbox: nothing here moves real money.</div>' : ''}
${notice}
<h2>Your plans</h2>${plans}
<h2>Usage</h2>${renderUsageChart(view.usage)}
<h2>Payment methods</h2>${cards}
<h2>Your details</h2>${details}
<h2>Credits</h2><p>Balance: <span class="balance" id="balance">${view.credits}</span> credits</p>${buyForm}
<h2>Auto top-up</h2>${autoLine}${topUpForm}
<h2>Alerts</h2>${alerts}
<h2>Credit movements</h2>${movements}
<h2>Invoices</h2>${view.plans
      .filter((p) => p.nextInvoice !== null)
      .map((p) => {
        const next = p.nextInvoice;
        if (next === null) return '';
        return `<p class="next-invoice">Next invoice on ${day(next.at)} (${escapeHtml(`${p.product}, ${p.plan}`)}): <strong>${escapeHtml(next.total)}</strong>, ${escapeHtml(next.advance)} for the next period${next.usage === null ? '' : ` plus ${escapeHtml(next.usage)} of usage so far`}${next.discount === null ? '' : `, less ${escapeHtml(next.discount)} discount`}</p>`;
      })
      .join('')}${view.plans
      .filter((p) => p.usageSoFar !== null)
      .map(
        (p) =>
          `<p class="upcoming">Usage so far this period (${escapeHtml(`${p.product}, ${p.plan}`)}): ${escapeHtml(p.usageSoFar?.total ?? '')} for ${p.usageSoFar?.calls ?? 0} billable calls, on your next invoice</p>`,
      )
      .join('')}${
      view.upcoming.length === 0
        ? ''
        : `<p id="upcoming">${view.upcoming.map((u) => `Being finalized (draft ${escapeHtml(u.id)}): ${escapeHtml(u.total)} so far`).join('<br>')}</p>`
    }${invoices}
<footer>${view.returnUrl === null ? '' : `<a href="${escapeHtml(view.returnUrl)}">Back to ${escapeHtml(m.displayName)}</a>`}
<form method="post" action="/portal/sign-out"><input type="hidden" name="csrf" value="${escapeHtml(view.csrfToken)}"><button class="plain" type="submit">Sign out</button></form>
${m.supportEmail === null ? '' : `<a href="mailto:${escapeHtml(m.supportEmail)}">Support</a>`}</footer>`,
  );
}

/** Where a customer of `tenant` signs in to their portal (and its steps by mailed code). */
export const signInPath = (tenant: { providerId: string; environment: string }, step?: 'code' | 'verify') =>
  `/portal/sign-in/${encodeURIComponent(tenant.providerId)}${step === undefined ? '' : `/${step}`}${tenant.environment === 'live' ? '' : '?environment=sandbox'}`;

/** The portal's sign-in page: the email and password of the customer's account with the merchant. */
export function renderPortalSignIn(
  merchant: PortalView['merchant'],
  form: { action: string; codeAction: string; email: string; error: string | null; csrf: string },
): string {
  const csrf = `<input type="hidden" name="csrf" value="${escapeHtml(form.csrf)}">`;
  return shell(
    `Sign in to ${merchant.displayName}`,
    merchant.brandColor,
    `<header>${merchant.logoUrl === null ? '' : `<img src="${escapeHtml(merchant.logoUrl)}" alt="">`}<h1>Sign in to your ${escapeHtml(merchant.displayName)} account</h1></header>
<p>Use the email and password of the account you signed in to ${escapeHtml(merchant.displayName)} with from your MCP client.</p>
${form.error === null ? '' : `<div class="notice error" role="alert">${escapeHtml(form.error)}</div>`}
<form method="post" action="${escapeHtml(form.action)}">${csrf}
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="email" required value="${escapeHtml(form.email)}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<div><button type="submit">Sign in</button></div></form>
<h2>No password?</h2>
<form method="post" action="${escapeHtml(form.codeAction)}">${csrf}
<label for="code-email">Email for a code</label><input id="code-email" name="email" type="email" autocomplete="email" required value="${escapeHtml(form.email)}">
<div><button type="submit">Email me a code</button></div></form>`,
  );
}

/** The page that takes the code mailed to the customer. */
export function renderPortalCode(
  merchant: PortalView['merchant'],
  form: { action: string; codeId: string; email: string; error: string | null; csrf: string },
): string {
  return shell(
    `Sign in to ${merchant.displayName}`,
    merchant.brandColor,
    `<header>${merchant.logoUrl === null ? '' : `<img src="${escapeHtml(merchant.logoUrl)}" alt="">`}<h1>Enter your code</h1></header>
<p id="code-sent">If ${escapeHtml(form.email)} has an account with ${escapeHtml(merchant.displayName)}, we have mailed it a six-digit code. It works once, for 10 minutes.</p>
${form.error === null ? '' : `<div class="notice error" role="alert">${escapeHtml(form.error)}</div>`}
<form method="post" action="${escapeHtml(form.action)}"><input type="hidden" name="csrf" value="${escapeHtml(form.csrf)}"><input type="hidden" name="codeId" value="${escapeHtml(form.codeId)}"><input type="hidden" name="email" value="${escapeHtml(form.email)}">
<label for="code">Code</label><input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" required>
<div><button type="submit">Sign in</button></div></form>`,
  );
}

/** The page for a link that was used, has expired, or never was; and for a browser not signed in. */
export function renderPortalGone(
  merchant: PortalView['merchant'] | undefined,
  why: 'link' | 'session',
  signIn?: string,
): string {
  const name = merchant?.displayName ?? 'the provider';
  const text =
    why === 'link'
      ? `This link to your ${name} account has expired or was already used. Links work once, for 15 minutes: go back to ${name} and open your account again for a new one.`
      : `You are not signed in to your ${name} account here, or your session ended. Open your account again from ${name}.`;
  return shell(
    'Account link',
    merchant?.brandColor ?? null,
    `<h1>${why === 'link' ? 'This link has expired' : 'Not signed in'}</h1><p id="gone">${escapeHtml(text)}</p>${
      signIn === undefined
        ? ''
        : `<p><a href="${escapeHtml(signIn)}">Sign in with your account instead</a></p>`
    }${
      merchant?.supportEmail == null
        ? ''
        : `<p><a href="mailto:${escapeHtml(merchant.supportEmail)}">Contact ${escapeHtml(name)}</a></p>`
    }`,
  );
}
