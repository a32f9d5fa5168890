import { escapeHtml } from '../../http/html';
import { type PortalView, shell } from './page';

/** The page that takes the code mailed to a new address the customer asked to use. */
export function renderEmailCode(view: {
  merchant: PortalView['merchant'];
  codeId: string;
  email: string;
  csrf: string;
  error?: string;
}): string {
  const m = view.merchant;
  return shell(
    `${m.displayName}: confirm your new email address`,
    m.brandColor,
    `<header>${m.logoUrl === null ? '' : `<img src="${escapeHtml(m.logoUrl)}" alt="">`}<h1>Confirm your new email address</h1></header>
<p id="code-sent">We have mailed a six-digit code to ${escapeHtml(view.email)}. Enter it here to make it your address with ${escapeHtml(m.displayName)}. It works once, for 10 minutes.</p>
${view.error === undefined ? '' : `<div class="notice error" role="alert">${escapeHtml(view.error)}</div>`}
<form method="post" action="/portal/email/confirm"><input type="hidden" name="csrf" value="${escapeHtml(view.csrf)}"><input type="hidden" name="codeId" value="${escapeHtml(view.codeId)}">
<label for="code">Code</label><input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" required>
<div><button type="submit">Use this address</button></div></form>
<p><a href="/portal">Back to your account</a></p>`,
  );
}
