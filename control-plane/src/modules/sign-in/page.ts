import { brandStyle, escapeHtml } from '../../http/html';

/**
 * The hosted sign-in page: server-rendered, every value escaped, no script and no third-party
 * asset, so it works without JavaScript and with any assistive technology that reads forms.
 */

/** The page's forms: sign in, sign up, a new password, and the code that finishes the last two. */
export type SignInForm = 'login' | 'signup' | 'reset' | 'verify';

export interface SignInView {
  provider: { name: string; logoUrl: string | null; brandColor: string | null };
  serverName: string;
  clientName: string | null;
  /** The authorization request, carried through both forms as hidden fields. */
  params: Record<string, string>;
  csrf: string;
  /** Which form the message belongs to, and what went wrong. */
  message?: { form: SignInForm; text: string } | undefined;
  email?: string | undefined;
  sandbox: boolean;
}

/**
 * No script at all; forms post to this origin only, then redirect to the client (form-action is
 * left out: Chromium applies it to the redirect after a form post too). Never framed.
 */
export const SIGN_IN_CSP =
  "default-src 'none'; img-src https: data:; style-src 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'";

const PAGE_STYLE = `body{font-family:system-ui,sans-serif;background:#f5f6f8;margin:0;display:flex;justify-content:center;color:#1d1d1f}
main{background:#fff;max-width:440px;width:100%;margin:40px 16px;padding:28px;border-radius:12px;box-shadow:0 2px 12px #0001}
header{display:flex;align-items:center;gap:12px;margin-bottom:8px}header img{max-height:40px;max-width:160px}
h1{font-size:20px;margin:0}h2{font-size:16px;margin:24px 0 4px}p{color:#444;line-height:1.4}
label{display:block;font-size:14px;color:#333;margin-top:12px}
input{width:100%;box-sizing:border-box;padding:10px;border:1px solid #888;border-radius:6px;font-size:15px}
input:focus,button:focus{outline:3px solid var(--brand-text);outline-offset:1px}
button{margin-top:16px;width:100%;padding:12px;border:0;border-radius:6px;background:var(--brand);color:var(--on-brand);font-size:16px;cursor:pointer}
button.secondary{background:#fff;color:var(--brand-text);border:1px solid var(--brand-text)}
.alert{color:#b00020;margin:12px 0 0}.sandbox{background:#fff4cc;padding:6px 10px;border-radius:6px;font-size:13px}
hr{border:0;border-top:1px solid #e3e3e8;margin:24px 0 0}
details{margin-top:16px}summary{cursor:pointer;color:var(--brand-text)}
`;

export function renderSignIn(view: SignInView): string {
  const hidden = Object.entries(view.params)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('');
  const logo = view.provider.logoUrl?.startsWith('https://')
    ? `<img src="${escapeHtml(view.provider.logoUrl)}" alt="">`
    : '';
  const asking =
    view.clientName === null
      ? `An application wants to use <strong>${escapeHtml(view.serverName)}</strong> for you.`
      : `<strong>${escapeHtml(view.clientName)}</strong> wants to use <strong>${escapeHtml(view.serverName)}</strong> for you.`;
  const alert = (form: SignInForm) =>
    view.message?.form === form
      ? `<p class="alert" role="alert" id="${form}-error">${escapeHtml(view.message.text)}</p>`
      : '';
  const described = (form: SignInForm) =>
    view.message?.form === form ? ` aria-describedby="${form}-error"` : '';
  const email = escapeHtml(view.email ?? '');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in to ${escapeHtml(view.provider.name)}</title>
<style>
${brandStyle(view.provider.brandColor)}
${PAGE_STYLE}</style></head>
<body><main>
<header>${logo}<h1>${escapeHtml(view.provider.name)}</h1></header>
${view.sandbox ? '<p class="sandbox">Test mode: no real account or payment.</p>' : ''}
<p>${asking} Sign in, or create an account, to continue.</p>
<form method="post" action="/v1/customer/auth/authorize" aria-labelledby="login-title">
<h2 id="login-title">Sign in</h2>${alert('login')}
${hidden}<input type="hidden" name="csrf" value="${escapeHtml(view.csrf)}"><input type="hidden" name="intent" value="login">
<label for="login-email">Email</label><input id="login-email" name="email" type="email" autocomplete="email" required value="${email}"${described('login')}>
<label for="login-password">Password</label><input id="login-password" name="password" type="password" autocomplete="current-password" required${described('login')}>
<button type="submit">Sign in</button>
</form>
<hr>
<form method="post" action="/v1/customer/auth/authorize" aria-labelledby="signup-title">
<h2 id="signup-title">New here? Create an account</h2>${alert('signup')}
${hidden}<input type="hidden" name="csrf" value="${escapeHtml(view.csrf)}"><input type="hidden" name="intent" value="signup">
<label for="signup-name">Name (optional)</label><input id="signup-name" name="name" type="text" autocomplete="name" maxlength="200">
<label for="signup-email">Email</label><input id="signup-email" name="email" type="email" autocomplete="email" required${described('signup')}>
<label for="signup-password">Password (at least 8 characters)</label><input id="signup-password" name="password" type="password" autocomplete="new-password" minlength="8" required${described('signup')}>
<button type="submit" class="secondary">Create account</button>
</form>
<details${view.message?.form === 'reset' ? ' open' : ''}><summary>Forgot your password?</summary>
<form method="post" action="/v1/customer/auth/authorize" aria-labelledby="reset-title">
<h2 id="reset-title">Choose a new password</h2>${alert('reset')}
<p>We will email you a code; the new password works once you enter it.</p>
${hidden}<input type="hidden" name="csrf" value="${escapeHtml(view.csrf)}"><input type="hidden" name="intent" value="reset">
<label for="reset-email">Email</label><input id="reset-email" name="email" type="email" autocomplete="email" required${described('reset')}>
<label for="reset-password">New password (at least 8 characters)</label><input id="reset-password" name="password" type="password" autocomplete="new-password" minlength="8" required${described('reset')}>
<button type="submit" class="secondary">Email me a code</button>
</form>
</details>
</main></body></html>`;
}

/** The second step of a sign-up or a new password: the code mailed to the address. */
export function renderVerify(view: {
  provider: { name: string; brandColor: string | null };
  /** The authorization request, carried through as hidden fields (to start again). */
  params: Record<string, string>;
  csrf: string;
  verificationId: string;
  email: string;
  message?: string | undefined;
  sandbox: boolean;
}): string {
  const hidden = Object.entries(view.params)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('');
  const again = new URLSearchParams(view.params).toString();
  const alert =
    view.message === undefined
      ? ''
      : `<p class="alert" role="alert" id="verify-error">${escapeHtml(view.message)}</p>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Check your email: ${escapeHtml(view.provider.name)}</title>
<style>
${brandStyle(view.provider.brandColor)}
${PAGE_STYLE}</style></head>
<body><main>
<header><h1>${escapeHtml(view.provider.name)}</h1></header>
${view.sandbox ? '<p class="sandbox">Test mode: no real account or payment.</p>' : ''}
<form method="post" action="/v1/customer/auth/authorize" aria-labelledby="verify-title">
<h2 id="verify-title">Check your email</h2>
<p>We sent a six-digit code to <strong>${escapeHtml(view.email)}</strong>. Enter it to continue.</p>${alert}
${hidden}<input type="hidden" name="csrf" value="${escapeHtml(view.csrf)}"><input type="hidden" name="intent" value="verify">
<input type="hidden" name="verification" value="${escapeHtml(view.verificationId)}">
<label for="verify-code">Code</label><input id="verify-code" name="code" type="text" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" autocomplete="one-time-code" required${view.message === undefined ? '' : ' aria-describedby="verify-error"'}>
<button type="submit">Continue</button>
</form>
<p><a href="/v1/customer/auth/authorize?${escapeHtml(again)}">Start again</a></p>
</main></body></html>`;
}

/** A page for a request that cannot go back to the client (unknown client or redirect URI). */
export function renderSignInError(text: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign-in request not valid</title>
<style>body{font-family:system-ui,sans-serif;background:#f5f6f8;display:flex;justify-content:center}main{background:#fff;max-width:440px;margin:40px 16px;padding:28px;border-radius:12px}</style>
</head><body><main><h1>This sign-in request is not valid</h1><p role="alert">${escapeHtml(text)}</p>
<p>Go back to the application and try connecting again.</p></main></body></html>`;
}
