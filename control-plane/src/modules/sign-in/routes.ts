import { randomBytes } from 'node:crypto';
import { sameSecret } from '@mcp-meter/contracts/kit';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_STATUS } from '../../errors';
import type { App } from '../../http/app';
import { sendProblem } from '../../http/error-handler';
import { Problem } from '../../http/schemas';
import type { Authorization, AuthorizationParams } from './authorization';
import { OAuthError, SignInError } from './errors';
import {
  allowAnyOrigin,
  CSRF_COOKIE,
  cookieOf,
  DUPLICATE,
  displayName,
  OAuthOrProblem,
  oauthForm,
  paramsOf,
  sendOAuthError,
} from './oauth-http';
import { renderSignIn, renderSignInError, renderVerify, SIGN_IN_CSP, type SignInForm } from './page';
import {
  AuthorizationRequestFields,
  ClientRegistration,
  LoginBody,
  SignupBody,
  SignupStarted,
  TokenResponse,
  VerifyBody,
} from './schemas';
import type { SignInService } from './service';

/** A hosted page as the OpenAPI document describes it: HTML, not JSON. */
const HTML_PAGE = (description: string) => ({
  description,
  content: { 'text/html': { schema: { type: 'string' } } },
});

/** Back to the client's redirect URI, with the authorization code or an OAuth error. */
const REDIRECTED = {
  description: "To the client's redirect_uri with `code` and `state`, or `error` (RFC 6749 4.1.2)",
  type: 'null',
};

export function signInRoutes(signIn: SignInService, secureCookies: boolean) {
  return async (app: App) => {
    // OAuth clients send forms (RFC 6749 §4.1.3); a parameter given twice is refused, not merged.
    app.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string' },
      (_request, body, done) => {
        const form: Record<string, string> = {};
        for (const [name, value] of new URLSearchParams(body as string)) {
          if (Object.hasOwn(form, name)) {
            done(null, { [DUPLICATE]: name });
            return;
          }
          form[name] = value;
        }
        done(null, form);
      },
    );
    const tags = ['customer sign-in'];

    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'])
      app.get(
        path,
        { schema: { tags, summary: 'Authorization server metadata (RFC 8414)' } },
        async (_r, reply) => allowAnyOrigin(reply).send(signIn.metadata()),
      );

    for (const path of ['/v1/customer/auth/register', '/v1/customer/auth/token', '/v1/customer/auth/revoke'])
      app.options(path, { schema: { hide: true } }, async (_request, reply) =>
        allowAnyOrigin(reply)
          .header('access-control-allow-methods', 'POST, OPTIONS')
          .header('access-control-allow-headers', 'authorization, content-type, mcp-protocol-version')
          .header('access-control-max-age', '86400')
          .status(204)
          .send(),
      );

    app.post(
      '/v1/customer/auth/register',
      {
        schema: {
          tags,
          summary: 'Register an OAuth client (RFC 7591 dynamic client registration)',
          body: ClientRegistration,
          response: {
            201: Type.Object({ client_id: Type.String() }, { additionalProperties: true }),
            400: OAuthOrProblem,
          },
        },
      },
      async (request, reply) => {
        allowAnyOrigin(reply);
        try {
          return reply
            .status(201)
            .header('cache-control', 'no-store')
            .send(await signIn.register(request.body));
        } catch (error) {
          if (error instanceof OAuthError) return sendOAuthError(reply, error);
          throw error;
        }
      },
    );

    const page = (
      reply: FastifyReply,
      status: number,
      authorization: Authorization,
      params: AuthorizationParams,
      message?: { form: SignInForm; text: string },
      email?: string,
    ) => {
      const csrf = htmlHeaders(reply, status);
      return reply.send(
        renderSignIn({
          provider: authorization.provider,
          serverName: authorization.server.name,
          clientName: displayName(authorization.client),
          params: params as Record<string, string>,
          csrf,
          message,
          email,
          sandbox: authorization.tenant.environment === 'sandbox',
        }),
      );
    };
    /** Headers of every page: no script, never framed, never cached; a fresh CSRF cookie, answered. */
    const htmlHeaders = (reply: FastifyReply, status: number): string => {
      const csrf = randomBytes(24).toString('base64url');
      reply
        .status(status)
        .header('content-security-policy', SIGN_IN_CSP)
        .header('x-frame-options', 'DENY')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-store')
        .header(
          'set-cookie',
          `${CSRF_COOKIE}=${csrf}; Path=/v1/customer/auth; HttpOnly; SameSite=Lax${secureCookies ? '; Secure' : ''}`,
        )
        .type('text/html; charset=utf-8');
      return csrf;
    };
    const verifyPage = (
      reply: FastifyReply,
      status: number,
      authorization: Authorization,
      params: AuthorizationParams,
      verification: { id: string; email: string },
      message?: string,
    ) => {
      const csrf = htmlHeaders(reply, status);
      return reply.send(
        renderVerify({
          provider: authorization.provider,
          params: params as Record<string, string>,
          csrf,
          verificationId: verification.id,
          email: verification.email,
          message,
          sandbox: authorization.tenant.environment === 'sandbox',
        }),
      );
    };
    const errorPage = (reply: FastifyReply, text: string) =>
      reply
        .status(400)
        .header('content-security-policy', SIGN_IN_CSP)
        .header('cache-control', 'no-store')
        .type('text/html; charset=utf-8')
        .send(renderSignInError(text));

    /**
     * Checks an authorization request: a bad client or redirect URI is shown on a page (never
     * redirected: that would make this an open redirector); any other error goes back to the client.
     */
    const authorizationOf = async (
      reply: FastifyReply,
      params: AuthorizationParams,
    ): Promise<Authorization | undefined> => {
      // Answered here: undefined. (A reply is a thenable, so it is never returned from an async function.)
      try {
        await signIn.checkClient(params);
      } catch (error) {
        if (error instanceof OAuthError) {
          errorPage(reply, error.description);
          return undefined;
        }
        throw error;
      }
      try {
        return await signIn.authorize(params);
      } catch (error) {
        if (error instanceof OAuthError) {
          reply.redirect(signIn.errorRedirect(params.redirect_uri as string, params.state, error), 303);
          return undefined;
        }
        throw error;
      }
    };

    app.get(
      '/v1/customer/auth/authorize',
      {
        schema: {
          tags,
          summary: 'The authorization endpoint: the hosted sign-in page',
          description:
            'Opened in the customer’s browser by an MCP client (OAuth 2.1 with PKCE, RFC 8707 resource). A bad client or redirect URI is shown on a page and never redirected; any other error goes back to the redirect URI as an OAuth error.',
          querystring: AuthorizationRequestFields,
          response: {
            200: HTML_PAGE('The sign-in page'),
            303: REDIRECTED,
            '4xx': HTML_PAGE('A page naming what is wrong with the client or its redirect URI'),
          },
        },
      },
      async (request, reply) => {
        const params = paramsOf(request.query);
        const authorization = await authorizationOf(reply, params);
        if (authorization === undefined) return reply;
        return page(reply, 200, authorization, params);
      },
    );

    app.post(
      '/v1/customer/auth/authorize',
      {
        schema: {
          tags,
          summary: 'The hosted sign-in page posts here (form): sign in or sign up, then back to the client',
          description:
            'The form of the sign-in page: log in, sign up (then the mailed code), or reset a password. Success goes back to the client’s redirect URI with a code; a refusal (a wrong password, an expired page, too many attempts) is the page again, naming it.',
          consumes: ['application/x-www-form-urlencoded'],
          response: {
            200: HTML_PAGE('The next step’s page (the code sent by mail)'),
            303: REDIRECTED,
            '4xx': HTML_PAGE('The page again, naming what was refused (with Retry-After when rate limited)'),
          },
        },
      },
      async (request, reply) => {
        const form = (request.body ?? {}) as Record<string, unknown>;
        const params = paramsOf(form);
        const authorization = await authorizationOf(reply, params);
        if (authorization === undefined) return reply;
        const intent: SignInForm =
          form.intent === 'signup' || form.intent === 'reset' || form.intent === 'verify'
            ? form.intent
            : 'login';
        const csrf = cookieOf(request, CSRF_COOKIE);
        if (csrf === undefined || typeof form.csrf !== 'string' || !sameSecret(form.csrf, csrf))
          return page(reply, 403, authorization, params, {
            form: intent === 'verify' ? 'signup' : intent,
            text: 'This page expired. Please try again.',
          });
        const retryAfter = (error: SignInError) => {
          if (error.retryAfterSeconds !== undefined)
            reply.header('retry-after', String(error.retryAfterSeconds));
        };
        if (intent === 'verify') {
          const verification = {
            id: typeof form.verification === 'string' ? form.verification.slice(0, 100) : '',
            email: typeof form.email === 'string' ? form.email.slice(0, 320) : '',
          };
          const code = typeof form.code === 'string' ? form.code.trim() : '';
          try {
            const { redirectUrl } = await signIn.verifySignup(verification.id, code, request.ip);
            return reply.redirect(redirectUrl, 303);
          } catch (error) {
            if (!(error instanceof SignInError)) throw error;
            retryAfter(error);
            // A wrong code may be tried again on the same page; anything else starts over.
            if (error.code === 'invalid_verification_code')
              return verifyPage(reply, 400, authorization, params, verification, error.message);
            return page(reply, ERROR_STATUS[error.code], authorization, params, {
              form: 'signup',
              text: error.message,
            });
          }
        }
        const email = typeof form.email === 'string' ? form.email.slice(0, 320) : '';
        const password = typeof form.password === 'string' ? form.password : '';
        if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email) || password === '' || password.length > 1024)
          return page(
            reply,
            400,
            authorization,
            params,
            { form: intent, text: 'Enter your email and password.' },
            email,
          );
        try {
          if (intent === 'login') {
            const { redirectUrl } = await signIn.login(authorization, {
              email,
              password,
              address: request.ip,
            });
            return reply.redirect(redirectUrl, 303);
          }
          const started = await signIn.startSignup(authorization, {
            email,
            password,
            name:
              intent === 'signup' && typeof form.name === 'string' && form.name.trim() !== ''
                ? form.name.slice(0, 200)
                : undefined,
            address: request.ip,
          });
          return verifyPage(reply, 200, authorization, params, {
            id: started.verificationId,
            email: started.email,
          });
        } catch (error) {
          if (!(error instanceof SignInError)) throw error;
          retryAfter(error);
          return page(
            reply,
            ERROR_STATUS[error.code],
            authorization,
            params,
            { form: intent, text: error.message },
            email,
          );
        }
      },
    );

    /** The JSON twins of the page's forms (spec 4.3): the same checks, the redirect as JSON. */
    const jsonSignIn = async (
      request: FastifyRequest,
      body: Record<string, unknown>,
      reply: FastifyReply,
      intent: 'login' | 'signup',
    ) => {
      const params = paramsOf({ response_type: 'code', ...body });
      let authorization: Authorization;
      try {
        authorization = await signIn.authorize(params);
      } catch (error) {
        if (error instanceof OAuthError)
          return sendProblem(reply, 'invalid_authorization_request', error.description, {
            error: error.error,
          });
        throw error;
      }
      try {
        const credentials = {
          email: body.email as string,
          password: body.password as string,
          address: request.ip,
        };
        if (intent === 'login') return reply.send(await signIn.login(authorization, credentials));
        const name = typeof body.name === 'string' ? body.name : undefined;
        return reply.status(202).send(await signIn.startSignup(authorization, { ...credentials, name }));
      } catch (error) {
        if (!(error instanceof SignInError)) throw error;
        if (error.retryAfterSeconds !== undefined)
          reply.header('retry-after', String(error.retryAfterSeconds));
        return sendProblem(reply, error.code, error.message);
      }
    };
    const RedirectUrl = Type.Object({ redirectUrl: Type.String() });
    const signInResponses = {
      400: Problem,
      401: Problem,
      429: Problem,
      503: Problem,
    };
    app.post(
      '/v1/customer/auth/logins',
      {
        schema: {
          tags,
          summary: 'Sign in with email and password; answers the redirect URL carrying the code',
          body: LoginBody,
          response: { 200: RedirectUrl, ...signInResponses },
        },
      },
      async (request, reply) => jsonSignIn(request, request.body, reply, 'login'),
    );
    app.post(
      '/v1/customer/auth/signups',
      {
        schema: {
          tags,
          summary: 'Sign up, or choose a new password: mails a one-time code to the email',
          description:
            'Nothing is created yet, and the answer is the same for every email. POST the mailed code to /v1/customer/auth/signups/{verificationId}/verify within 10 minutes to finish.',
          body: SignupBody,
          response: { 202: SignupStarted, ...signInResponses },
        },
      },
      async (request, reply) => jsonSignIn(request, request.body, reply, 'signup'),
    );
    app.post(
      '/v1/customer/auth/signups/:verificationId/verify',
      {
        schema: {
          tags,
          summary:
            "Finish a sign-up with the mailed code: sets the password (creating the customer of the MCP server's provider if none has the email) and answers the redirect URL",
          params: Type.Object({ verificationId: Type.String({ minLength: 1, maxLength: 100 }) }),
          body: VerifyBody,
          response: { 200: RedirectUrl, 404: Problem, ...signInResponses },
        },
      },
      async (request, reply) => {
        try {
          return await signIn.verifySignup(request.params.verificationId, request.body.code, request.ip);
        } catch (error) {
          if (!(error instanceof SignInError)) throw error;
          if (error.retryAfterSeconds !== undefined)
            reply.header('retry-after', String(error.retryAfterSeconds));
          return sendProblem(reply, error.code, error.message);
        }
      },
    );

    app.post(
      '/v1/customer/auth/token',
      {
        schema: {
          tags,
          summary: 'The token endpoint: authorization_code (PKCE S256) and refresh_token (rotating)',
          consumes: ['application/x-www-form-urlencoded', 'application/json'],
          response: { 200: TokenResponse, 400: OAuthOrProblem, 401: OAuthOrProblem },
        },
      },
      async (request, reply) => {
        allowAnyOrigin(reply).header('cache-control', 'no-store').header('pragma', 'no-cache');
        try {
          return await signIn.token(oauthForm(request.body), request.headers.authorization);
        } catch (error) {
          if (error instanceof OAuthError)
            return sendOAuthError(reply, error, /^basic /i.test(request.headers.authorization ?? ''));
          throw error;
        }
      },
    );

    app.post(
      '/v1/customer/auth/revoke',
      {
        schema: {
          tags,
          summary: 'Revoke a refresh token and its sign-in (RFC 7009)',
          consumes: ['application/x-www-form-urlencoded', 'application/json'],
          response: { 200: Type.Object({}), 400: OAuthOrProblem, 401: OAuthOrProblem },
        },
      },
      async (request, reply) => {
        allowAnyOrigin(reply).header('cache-control', 'no-store');
        try {
          await signIn.revoke(oauthForm(request.body), request.headers.authorization);
          return {};
        } catch (error) {
          if (error instanceof OAuthError)
            return sendOAuthError(reply, error, /^basic /i.test(request.headers.authorization ?? ''));
          throw error;
        }
      },
    );
  };
}
