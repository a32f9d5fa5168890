import { sameSecret } from '@mcp-meter/contracts/kit';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, ERROR_STATUS } from '../../errors';
import type { App } from '../../http/app';
import type { AuthContext } from '../../tenancy';
import { SignInError } from '../sign-in/errors';
import { cookieOf } from '../sign-in/oauth-http';
import { newSecret } from '../sign-in/secrets';
import type { PortalCodes } from './codes';
import { type Form, hide, page, portalCookie, singleFields } from './http';
import { type PortalView, renderPortalCode, renderPortalGone, renderPortalSignIn, signInPath } from './page';
import type { PortalService } from './service';

const ProviderParams = Type.Object({ providerId: Type.String({ minLength: 1, maxLength: 100 }) });
const EnvironmentQuery = Type.Object({ environment: Type.Optional(Type.String({ maxLength: 10 })) });
const schema = { ...hide, params: ProviderParams, querystring: EnvironmentQuery };
type SignInRequest = { params: { providerId: string }; query: { environment?: string | undefined } };

/**
 * The sign-in forms' CSRF cookie (double submit): a browser's forms carry the value its cookie
 * holds, which a form posted from another site cannot know, so nobody can sign a browser in to
 * an account of their own choosing (login CSRF).
 */
const SIGN_IN_COOKIE = 'mcpm_portal_signin';

/**
 * The portal's sign-in pages of one provider's customers: with the email and password of the
 * account MCP sign-in made (its check and throttles), or with a code mailed to the address.
 * Each ends by signing the browser in to the portal and redirecting there.
 */
export function signInPages(app: App, portal: PortalService, codes: PortalCodes, secureCookies: boolean) {
  /** The tenant and merchant a sign-in page is for; answers 404 when the provider is not known here. */
  const signInOf = async (request: SignInRequest, reply: FastifyReply) => {
    const tenant: AuthContext = {
      providerId: request.params.providerId,
      environment: request.query.environment === 'sandbox' ? 'sandbox' : 'live',
    };
    const merchant = await portal.signInPage(tenant);
    if (merchant === undefined) {
      await page(reply).status(404).send(renderPortalGone(undefined, 'session'));
      return undefined;
    }
    return { tenant, merchant };
  };
  /** Signed in: the cookie, and on to the portal. */
  const signedIn = (reply: FastifyReply, secret: string) =>
    reply
      .header('set-cookie', portalCookie(secret, secureCookies))
      .header('cache-control', 'no-store')
      .redirect('/portal', 303);
  /** A refusal shown on `render`'s page, with its status (and when to try again). */
  const refused = (reply: FastifyReply, error: unknown, render: (message: string) => string) => {
    if (!(error instanceof DomainError)) throw error;
    if (error instanceof SignInError && error.retryAfterSeconds !== undefined)
      reply.header('retry-after', String(error.retryAfterSeconds));
    return page(reply).status(ERROR_STATUS[error.code]).send(render(error.message));
  };
  /** The browser's sign-in CSRF token: the one its cookie holds, or a new one set now. */
  const csrfOf = (request: FastifyRequest, reply: FastifyReply) => {
    const held = cookieOf(request, SIGN_IN_COOKIE);
    if (held !== undefined && /^[A-Za-z0-9_-]{43}$/.test(held)) return held;
    const token = newSecret();
    reply.header(
      'set-cookie',
      `${SIGN_IN_COOKIE}=${token}; Path=/portal/sign-in; HttpOnly; SameSite=Lax; Max-Age=3600${secureCookies ? '; Secure' : ''}`,
    );
    return token;
  };
  /** Refuses a form whose fields repeat, or whose CSRF token is not its browser's. */
  const checkForm = (request: FastifyRequest, fields: Form) => {
    singleFields(fields);
    const held = cookieOf(request, SIGN_IN_COOKIE);
    if (held === undefined || !sameSecret(fields.csrf ?? '', held))
      throw new DomainError('csrf_failed', 'The form is out of date: reload the page and try again');
  };
  const signInForm = (
    to: { tenant: AuthContext; merchant: PortalView['merchant'] },
    form: { email: string; error: string | null; csrf: string },
  ) =>
    renderPortalSignIn(to.merchant, {
      action: signInPath(to.tenant),
      codeAction: signInPath(to.tenant, 'code'),
      ...form,
    });
  const codeForm = (
    to: { tenant: AuthContext; merchant: PortalView['merchant'] },
    form: { codeId: string; email: string; error: string | null; csrf: string },
  ) => renderPortalCode(to.merchant, { action: signInPath(to.tenant, 'verify'), ...form });

  app.get('/portal/sign-in/:providerId', { schema }, async (request, reply) => {
    const to = await signInOf(request, reply);
    if (to === undefined) return reply;
    return page(reply).send(signInForm(to, { email: '', error: null, csrf: csrfOf(request, reply) }));
  });

  type To = { tenant: AuthContext; merchant: PortalView['merchant'] };
  /**
   * A sign-in form: `act` answers once the form is checked; a refusal shows the page `again`
   * renders with why, and its status.
   */
  const signInPost = (
    path: string,
    act: (to: To, fields: Form, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
    again: (to: To, fields: Form, message: string, csrf: string) => string,
  ) =>
    app.post(path, { schema }, async (request, reply) => {
      const to = await signInOf(request, reply);
      if (to === undefined) return reply;
      const fields = (request.body ?? {}) as Form;
      try {
        checkForm(request, fields);
        return await act(to, fields, request, reply);
      } catch (error) {
        return refused(reply, error, (message) => again(to, fields, message, csrfOf(request, reply)));
      }
    });
  const emailOf = (fields: Form) => (fields.email ?? '').slice(0, 320);
  const signInAgain = (to: To, fields: Form, message: string, csrf: string) =>
    signInForm(to, { email: emailOf(fields), error: message, csrf });

  signInPost(
    '/portal/sign-in/:providerId',
    async (to, fields, request, reply) =>
      signedIn(
        reply,
        await portal.signIn(to.tenant, {
          email: emailOf(fields),
          password: (fields.password ?? '').slice(0, 1000),
          address: request.ip,
        }),
      ),
    signInAgain,
  );

  // No password: a code mailed to the address, then the code.
  signInPost(
    '/portal/sign-in/:providerId/code',
    async (to, fields, request, reply) => {
      const sent = await codes.mail(to.tenant, emailOf(fields), request.ip);
      return page(reply).send(
        codeForm(to, { codeId: sent.id, email: sent.email, error: null, csrf: csrfOf(request, reply) }),
      );
    },
    signInAgain,
  );

  signInPost(
    '/portal/sign-in/:providerId/verify',
    async (to, fields, request, reply) =>
      signedIn(
        reply,
        await codes.verify(
          to.tenant,
          (fields.codeId ?? '').slice(0, 100),
          (fields.code ?? '').trim().slice(0, 20),
          request.ip,
        ),
      ),
    (to, fields, message, csrf) =>
      codeForm(to, {
        codeId: (fields.codeId ?? '').slice(0, 100),
        email: emailOf(fields),
        error: message,
        csrf,
      }),
  );
}
