import type { FastifyReply } from 'fastify';
import { ValidationError } from '../../errors';
import type { App } from '../../http/app';
import { PORTAL_CSP } from './page';
import { SESSION_TTL_MS } from './service';

/** The portal browser's cookie: its secret, HttpOnly, sent back only to /portal. */
export const PORTAL_COOKIE = 'mcpm_portal';

/** The cookie that signs a browser in (or out, with no value and no age). */
export const portalCookie = (
  value: string,
  secure: boolean,
  maxAgeSeconds = Math.floor(SESSION_TTL_MS / 1000),
) =>
  `${PORTAL_COOKIE}=${value}; Path=/portal; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${secure ? '; Secure' : ''}`;

/** The portal's pages are not part of the API document. */
export const hide = { hide: true };

/** A page of the portal: no script, nothing cached, no referrer sent on. */
export const page = (reply: FastifyReply) =>
  reply
    .header('content-security-policy', PORTAL_CSP)
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .type('text/html; charset=utf-8');

/** A form's fields; a field given twice is refused (the parser marks it). */
export const DUPLICATE = Symbol('duplicate field');
export type Form = Record<string, string> & { [DUPLICATE]?: string };

/** Reads the portal's forms (url-encoded), marking a field given twice. */
export function parseForms(app: App) {
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (_request, body, done) => {
      const form: Form = {};
      for (const [name, value] of new URLSearchParams(body as string)) {
        if (Object.hasOwn(form, name)) form[DUPLICATE] = name;
        form[name] = value;
      }
      done(null, form);
    },
  );
}

/** Refuses a form with a field given twice. */
export function singleFields(form: Form): void {
  if (form[DUPLICATE] !== undefined)
    throw new ValidationError([
      { path: `/${form[DUPLICATE]}`, message: 'was given twice', location: 'body' },
    ]);
}
