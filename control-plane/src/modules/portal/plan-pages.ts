import type { ErrorCode } from '../../errors';
import { escapeHtml } from '../../http/html';
import { CANCELLATION_FEEDBACK, FEEDBACK_WORDS } from '../purchases/cancellation';
import { day, type PortalView, shell } from './page';

/** The plan-change page: the plans to switch to, and the chosen one's preview. */
export interface ChangeView {
  merchant: PortalView['merchant'];
  csrfToken: string;
  purchaseRef: string;
  product: string;
  plan: string;
  choices: Array<{ id: string; name: string; lines: string[] }>;
  preview: {
    planRef: string;
    planName: string;
    lines: Array<{ description: string; amount: string }>;
    credit: string;
    dueNow: string;
    refund: string | null;
    checkoutRequired: boolean;
    prorationDate: string;
  } | null;
  /** The product takes promotion codes on a plan change in the portal (`portalPromotionCodes`). */
  promotionCodes: boolean;
  /** The promotion code the preview applied, which confirming redeems. */
  code: string | null;
  /** Why the code typed was not taken (the preview is without it), and its status. */
  codeRefusal: { code: ErrorCode; message: string } | null;
}

export interface CancelView {
  merchant: PortalView['merchant'];
  csrfToken: string;
  purchaseRef: string;
  product: string;
  plan: string;
  periodEnd: string | null;
  /** A recurring purchase not already ending may end at its period's end instead. */
  atPeriodEnd: boolean;
  /** The product's retention offer in words ("Stay (20% off), on the first invoice"), or null. */
  retention: string | null;
  /** What cancelling now refunds (the unused paid time), or null when nothing. */
  refund: string | null;
  prorationDate: string;
}

const header = (m: PortalView['merchant']) =>
  `<header>${m.logoUrl === null ? '' : `<img src="${escapeHtml(m.logoUrl)}" alt="">`}<h1>${escapeHtml(m.displayName)}</h1></header>`;
const hidden = (name: string, value: string) =>
  `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`;

export function renderChangePlan(view: ChangeView): string {
  const link = (id: string) =>
    `/portal/change/${encodeURIComponent(view.purchaseRef)}?plan=${encodeURIComponent(id)}`;
  const choices =
    view.choices.length === 0
      ? '<p>There is no other plan of this product to change to.</p>'
      : `<ul class="choices">${view.choices
          .map(
            (c) =>
              `<li><a href="${escapeHtml(link(c.id))}"${view.preview?.planRef === c.id ? ' aria-current="true"' : ''}>${escapeHtml(c.name)}</a>: ${escapeHtml(c.lines.join('; '))}</li>`,
          )
          .join('')}</ul>`;
  const p = view.preview;
  const change = `/portal/change/${encodeURIComponent(view.purchaseRef)}`;
  const refusal =
    view.codeRefusal === null
      ? ''
      : `<p id="code-error" role="alert">${escapeHtml(view.codeRefusal.message)}.</p>`;
  // A GET form: the code's preview is a page like any other plan's, and applying it changes nothing.
  const codeField =
    p === null
      ? ''
      : !view.promotionCodes
        ? refusal
        : view.code !== null
          ? `<p id="code-applied">Promotion code <strong>${escapeHtml(view.code)}</strong> applied. <a href="${escapeHtml(link(p.planRef))}">Remove it</a></p>`
          : `<form method="get" action="${escapeHtml(change)}" class="code">${hidden('plan', p.planRef)}
<div><label for="code">Promotion code</label> <input id="code" name="code" maxlength="40" autocomplete="off"${
              view.codeRefusal === null ? '' : ' aria-invalid="true" aria-describedby="code-error"'
            }> <button type="submit">Apply</button></div>${refusal}</form>`;
  const preview =
    p === null
      ? '<p>Choose a plan to see what changing to it costs.</p>'
      : `<h2>Change to ${escapeHtml(p.planName)}</h2>
<p>Your ${escapeHtml(view.plan)} plan ends now; ${escapeHtml(p.planName)} starts today with a new period.${p.checkoutRequired ? ' You have no card on file: you pay at checkout, where the unused time is worked out again when you pay.' : ''}</p>
${
  p.lines.length === 0
    ? ''
    : `<table id="proration"><thead><tr><th scope="col">Line</th><th scope="col" class="n">Amount</th></tr></thead><tbody>${p.lines
        .map(
          (l) => `<tr><td>${escapeHtml(l.description)}</td><td class="n">${escapeHtml(l.amount)}</td></tr>`,
        )
        .join('')}</tbody></table>`
}
${codeField}
<p id="due-now">Charged now: <strong>${escapeHtml(p.dueNow)}</strong>${p.refund === null ? '' : `; refunded to your card: <strong>${escapeHtml(p.refund)}</strong>`}</p>
<form method="post" action="/portal/change">${hidden('csrf', view.csrfToken)}${hidden('purchaseRef', view.purchaseRef)}${hidden('planRef', p.planRef)}${hidden('prorationDate', p.prorationDate)}${hidden('code', view.code ?? '')}
<div><button type="submit">${p.checkoutRequired ? 'Continue to checkout' : `Change to ${escapeHtml(p.planName)}`}</button></div></form>
<p class="fine">Confirm within 15 minutes to be charged exactly this.</p>`;
  return shell(
    `${view.merchant.displayName}: change plan`,
    view.merchant.brandColor,
    `${header(view.merchant)}<p><a href="/portal">Back to your account</a></p>
<h2>Change your ${escapeHtml(`${view.product} plan (now ${view.plan})`)}</h2>${choices}${preview}`,
  );
}

export function renderCancel(view: CancelView): string {
  // One form, so the reason goes with either button: each names its own action.
  const reasons = CANCELLATION_FEEDBACK.map(
    (key) => `<option value="${key}">${escapeHtml(FEEDBACK_WORDS[key])}</option>`,
  ).join('');
  const why = `<div><label for="feedback">Why are you cancelling? (optional)</label>
<select id="feedback" name="feedback"><option value="">Choose a reason</option>${reasons}</select></div>
<div><label for="comment">Anything you would like to tell us? (optional)</label>
<textarea id="comment" name="comment" rows="3" maxlength="500"></textarea></div>`;
  const ending = view.atPeriodEnd
    ? `<h3>At the end of the period</h3><p>Keep using ${escapeHtml(view.plan)} until ${day(view.periodEnd)}; nothing is refunded.</p>
<div><button type="submit" formaction="/portal/cancel">Cancel at period end</button></div>`
    : '';
  return shell(
    `${view.merchant.displayName}: cancel plan`,
    view.merchant.brandColor,
    `${header(view.merchant)}<p><a href="/portal">Back to your account</a></p>
<h2>Cancel your ${escapeHtml(`${view.product} plan (${view.plan})`)}</h2>${
      view.retention === null
        ? ''
        : `<section id="retention" aria-labelledby="retention-title"><h3 id="retention-title">Before you go</h3>
<p>Keep your plan and get <strong>${escapeHtml(view.retention)}</strong>.</p>
<form method="post" action="/portal/retention">${hidden('csrf', view.csrfToken)}${hidden('purchaseRef', view.purchaseRef)}<div><button type="submit">Keep my plan with this offer</button></div></form></section>`
    }
<form method="post" action="/portal/cancel-now">${hidden('csrf', view.csrfToken)}${hidden('purchaseRef', view.purchaseRef)}${hidden('prorationDate', view.prorationDate)}
${why}${ending}
<h3>Now</h3><p id="refund-now">Your plan ends at once. ${
      view.refund === null
        ? 'Nothing is refunded.'
        : `The unused time you paid for, <strong>${escapeHtml(view.refund)}</strong>, is refunded to your card.`
    } Usage so far is billed on a final invoice.</p>
<div><button type="submit">Cancel now</button></div></form>`,
  );
}
