import { brandStyle, escapeHtml } from '../../http/html';
import { BILLING_SCRIPT, type BillingAsk, billingFields } from './billing-fields';

/** The hosted checkout page: server-rendered, every value escaped, no third-party assets. */
export interface CheckoutView {
  sessionId: string;
  merchant: {
    displayName: string;
    logoUrl: string | null;
    brandColor: string | null;
    termsUrl: string | null;
    privacyUrl: string | null;
    supportEmail: string | null;
  };
  title: string;
  lines: string[];
  dueNow: string;
  /** The button's word: Pay, or Save card when nothing is charged. */
  action: string;
  cancelUrl: string | null;
  sandbox: boolean;
  /** A plan or top-up session that takes promotion codes: whether one is applied now; null otherwise. */
  promotion: { applied: boolean } | null;
  /** What the session asks besides a card (billing-fields.ts); null when nothing. */
  billing: BillingAsk | null;
  /**
   * Where the card is given when the processor takes it on a page of its own and this page
   * comes first for a promotion code (live sessions that take codes); null: the card is taken here.
   */
  continueUrl: string | null;
}

/** The card form, or the way on to the processor's page that takes the card. */
function cardForm(view: CheckoutView): string {
  if (view.continueUrl !== null)
    return `<p>You give your card and pay on the next page.</p>
<a class="button" id="continue" href="${escapeHtml(view.continueUrl)}">Continue to payment</a>`;
  return `<form id="pay" autocomplete="on">
${billingFields(view.billing)}
<label for="number">Card number</label><input id="number" name="number" inputmode="numeric" autocomplete="cc-number" required>
<div class="row"><div><label for="exp">Expiry (MM/YY)</label><input id="exp" name="exp" autocomplete="cc-exp" required></div>
<div><label for="cvc">CVC</label><input id="cvc" name="cvc" inputmode="numeric" autocomplete="cc-csc" required></div></div>
<button type="submit" id="submit">${escapeHtml(view.action)}</button><div id="error" role="alert"></div>
</form>`;
}

/** The promotion-code field of the page, or the button that takes an applied code off. */
function promotionForm(promotion: CheckoutView['promotion']): string {
  if (promotion === null) return '';
  if (promotion.applied)
    return '<button type="button" id="promo-remove" class="secondary">Remove the promotion code</button><div id="promo-error" role="alert"></div>';
  return `<form id="promo" autocomplete="off"><label for="code">Promotion code</label><input id="code" name="code" maxlength="40">
<button type="submit" id="promo-apply" class="secondary">Apply code</button><div id="promo-error" role="alert"></div></form>`;
}

/** Minor units to a display price with the currency's symbol and decimals, e.g. 900 usd → "$9.00". */
export function formatMoney(amount: number, currency: string): string {
  const format = new Intl.NumberFormat('en', {
    style: 'currency',
    currency,
    currencyDisplay: 'narrowSymbol',
  });
  const digits = format.resolvedOptions().maximumFractionDigits ?? 2;
  return format.format(amount / 10 ** digits);
}

export const CHECKOUT_CSP =
  "default-src 'none'; img-src https: http: data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

export function renderCheckout(view: CheckoutView): string {
  const m = view.merchant;
  const links = [
    m.termsUrl === null ? '' : `<a href="${escapeHtml(m.termsUrl)}" target="_blank" rel="noopener">Terms</a>`,
    m.privacyUrl === null
      ? ''
      : `<a href="${escapeHtml(m.privacyUrl)}" target="_blank" rel="noopener">Privacy</a>`,
    m.supportEmail === null ? '' : `<a href="mailto:${escapeHtml(m.supportEmail)}">Support</a>`,
  ].filter(Boolean);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pay ${escapeHtml(m.displayName)}</title>
<style>
${brandStyle(m.brandColor)}
body{font-family:system-ui,sans-serif;background:#f5f6f8;margin:0;display:flex;justify-content:center}
main{background:#fff;max-width:420px;width:100%;margin:40px 16px;padding:28px;border-radius:12px;box-shadow:0 2px 12px #0001}
header{display:flex;align-items:center;gap:12px;margin-bottom:20px}header img{max-height:40px;max-width:160px}
h1{font-size:18px;margin:0}h2{font-size:16px;margin:0 0 6px}.due{font-size:28px;font-weight:600;margin:12px 0}
ul{padding-left:18px;color:#444}label{display:block;font-size:13px;color:#555;margin-top:12px}
input{width:100%;box-sizing:border-box;padding:10px;border:1px solid #ccc;border-radius:6px;font-size:15px}
.row{display:flex;gap:10px}.row>div{flex:1}button,a.button{display:block;box-sizing:border-box;text-align:center;text-decoration:none;margin-top:20px;width:100%;padding:12px;border:0;border-radius:6px;background:var(--brand);color:var(--on-brand);font-size:16px}
footer a{color:var(--brand-text)}
fieldset{border:0;padding:0;margin:16px 0 0}legend{font-weight:600;font-size:14px}select{width:100%;padding:10px;border:1px solid #ccc;border-radius:6px;font-size:15px;background:#fff}label.check{display:flex;gap:8px;align-items:center}label.check input{width:auto}
#error,#promo-error{color:#b00020;margin-top:12px;min-height:1em}button.secondary{background:#fff;color:var(--brand-text);border:1px solid #ccc;margin-top:8px}footer{margin-top:20px;font-size:12px;color:#777;display:flex;gap:12px}
.sandbox{background:#fff4cc;padding:6px 10px;border-radius:6px;font-size:12px;margin-bottom:12px}
</style></head>
<body><main>
<header>${m.logoUrl === null ? '' : `<img src="${escapeHtml(m.logoUrl)}" alt="">`}<h1>${escapeHtml(m.displayName)}</h1></header>
${view.sandbox ? '<div class="sandbox">Sandbox: use test card 4242 4242 4242 4242, any future date, any CVC.</div>' : ''}
<h2 id="title">${escapeHtml(view.title)}</h2>
<ul>${view.lines.map((l) => `<li>${escapeHtml(l)}</li>`).join('')}</ul>
<div class="due" id="due">${escapeHtml(view.dueNow)}</div>
${promotionForm(view.promotion)}
${cardForm(view)}
<footer>${links.join('')}${view.cancelUrl === null ? '' : `<a href="${escapeHtml(view.cancelUrl)}">Cancel</a>`}</footer>
</main>
<script>
${BILLING_SCRIPT}
async function setCode(code) {
  const error = document.getElementById('promo-error'); error.textContent = '';
  if (code === '') { error.textContent = 'Type a code first'; return; }
  try {
    const response = await fetch(${JSON.stringify(`/checkout/${view.sessionId}/promotion-code`)}, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code }) });
    if (response.ok) { window.location.reload(); return; }
    const body = await response.json(); error.textContent = body.detail || 'That code cannot be used';
  } catch (e) { error.textContent = 'Network error; try again'; }
}
const promo = document.getElementById('promo');
if (promo) promo.addEventListener('submit', (event) => { event.preventDefault(); setCode(document.getElementById('code').value.trim()); });
const removeCode = document.getElementById('promo-remove');
if (removeCode) removeCode.addEventListener('click', () => setCode(null));
const pay = document.getElementById('pay');
if (pay) pay.addEventListener('submit', async (event) => {
  event.preventDefault();
  const button = document.getElementById('submit'); const error = document.getElementById('error');
  const [month, year] = document.getElementById('exp').value.split('/').map((s) => parseInt(s.trim(), 10));
  button.disabled = true; error.textContent = '';
  try {
    const response = await fetch(${JSON.stringify(`/checkout/${view.sessionId}/pay`)}, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ card: { number: document.getElementById('number').value, expMonth: month || 0, expYear: year < 100 ? 2000 + year : year || 0, cvc: document.getElementById('cvc').value }, billing: billingOf() }) });
    const body = await response.json();
    if (!response.ok) { error.textContent = problemWords(body) || 'Payment failed'; button.disabled = false; return; }
    window.location.assign(body.redirectUrl);
  } catch (e) { error.textContent = 'Network error; try again'; button.disabled = false; }
});
</script></body></html>`;
}

export function renderDone(message: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Done</title></head><body style="font-family:system-ui,sans-serif;text-align:center;margin-top:80px"><h1>${escapeHtml(message)}</h1></body></html>`;
}
