import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../errors';
import { type App, authOf } from '../../http/app';
import { errorResponses, ListQuery, Problem } from '../../http/schemas';
import { cookieOf } from '../sign-in/oauth-http';
import { actorOf, type ConsoleAudit } from './audit';
import { AuditPage, CsrfHeader, PasswordChange, Session, SignInBody } from './schemas';
import { SESSION_LIFETIME_MS, type SessionView, type TeamService } from './service';

/** The console session's cookie: its secret, HttpOnly, sent to this origin only. */
export const CONSOLE_COOKIE = 'mcpm_console';

export const problems = { 400: Problem, 401: Problem, 403: Problem, 429: Problem, 503: Problem } as const;

/** The session cookie's header: the secret, HttpOnly, SameSite=Strict, Secure over https. */
export const sessionCookie = (value: string, maxAgeSeconds: number, secure: boolean) =>
  `${CONSOLE_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure ? '; Secure' : ''}`;

/** Answers a new session (201) with its cookie, and records the sign-in in the audit log. */
export async function sendSession(
  reply: FastifyReply,
  request: FastifyRequest,
  audit: ConsoleAudit,
  started: { token: string; session: SessionView },
  secure: boolean,
) {
  const { session } = started;
  await audit.record(
    {
      providerId: session.provider.id,
      environment: null,
      userId: session.user.id,
      email: session.user.email,
      role: session.role,
      sessionId: session.id,
    },
    request,
    201,
  );
  return reply
    .status(201)
    .header('set-cookie', sessionCookie(started.token, Math.floor(SESSION_LIFETIME_MS / 1000), secure))
    .header('cache-control', 'no-store')
    .send(session);
}

/** Sets Retry-After from a refusal that names one (429, 503), then lets it answer. */
export function withRetryAfter(reply: FastifyReply, error: unknown): never {
  const retryAfter = error instanceof DomainError ? error.details.retryAfter : undefined;
  if (typeof retryAfter === 'number') reply.header('retry-after', String(retryAfter));
  throw error;
}
const csrfOf = (request: FastifyRequest) => {
  const value = request.headers['x-csrf-token'];
  return typeof value === 'string' ? value : undefined;
};

/**
 * The console's sign-in and its session (issue 62): a member signs in with email and password
 * and gets a session cookie, then calls the API with it, as a key would, within their role. The
 * cookie is HttpOnly, SameSite=Strict, Secure when the service is reached over https, and lives
 * no longer than the session; changes need the session's CSRF token in X-CSRF-Token.
 */
export function teamRoutes(team: TeamService, audit: ConsoleAudit, secureCookies: boolean) {
  const cleared = (reply: FastifyReply) => reply.header('set-cookie', sessionCookie('', 0, secureCookies));

  return async (app: App) => {
    const tags = ['console'];
    app.post(
      '/v1/console/sessions',
      {
        schema: {
          tags,
          summary: 'Sign in to the console: a session cookie for a member of a provider',
          body: SignInBody,
          response: { 201: Session, 409: Problem, ...problems },
        },
      },
      async (request, reply) => {
        try {
          const started = await team.signIn({
            ...request.body,
            address: request.ip,
            userAgent: request.headers['user-agent'],
          });
          return await sendSession(reply, request, audit, started, secureCookies);
        } catch (error) {
          withRetryAfter(reply, error);
        }
      },
    );

    app.get(
      '/v1/console/session',
      {
        schema: {
          tags,
          summary: 'The console session of the cookie: who, at which provider, in which role',
          security: [{ consoleSession: [] }],
          response: { 200: Session, ...problems },
        },
      },
      async (request, reply) => {
        reply.header('cache-control', 'no-store');
        return (await team.session(cookieOf(request, CONSOLE_COOKIE))).view;
      },
    );

    app.delete(
      '/v1/console/session',
      {
        schema: {
          tags,
          summary: 'Sign out of the console in this browser',
          security: [{ consoleSession: [] }],
          headers: CsrfHeader,
          response: { 200: Type.Object({ signedOut: Type.Literal(true) }), ...problems },
        },
      },
      async (request, reply) => {
        const row = await team.signOut(cookieOf(request, CONSOLE_COOKIE), csrfOf(request));
        await audit.record(actorOf(row, row.role ?? 'viewer'), request, 200);
        cleared(reply);
        return { signedOut: true as const };
      },
    );

    app.post(
      '/v1/console/session/sign-out-everywhere',
      {
        schema: {
          tags,
          summary: 'Sign out of the console everywhere: every session of this account ends',
          security: [{ consoleSession: [] }],
          headers: CsrfHeader,
          response: { 200: Type.Object({ ended: Type.Integer() }), ...problems },
        },
      },
      async (request, reply) => {
        const { ended, row } = await team.signOutEverywhere(
          cookieOf(request, CONSOLE_COOKIE),
          csrfOf(request),
        );
        await audit.record(actorOf(row, row.role ?? 'viewer'), request, 200);
        cleared(reply);
        return { ended };
      },
    );

    app.put(
      '/v1/console/password',
      {
        schema: {
          tags,
          summary: 'Change the console password; every other session of the account ends',
          security: [{ consoleSession: [] }],
          headers: CsrfHeader,
          body: PasswordChange,
          response: { 200: Type.Object({ changed: Type.Literal(true) }), ...problems },
        },
      },
      async (request) => {
        const row = await team.changePassword(cookieOf(request, CONSOLE_COOKIE), csrfOf(request), {
          current: request.body.currentPassword,
          next: request.body.newPassword,
        });
        await audit.record(actorOf(row, row.role ?? 'viewer'), request, 200);
        return { changed: true as const };
      },
    );
  };
}

/** The audit log, read by owners and admins in the console, and by the provider's keys. */
export function auditRoutes(audit: ConsoleAudit) {
  return async (app: App) => {
    app.get(
      '/v1/ui/audit-events',
      {
        schema: {
          tags: ['console'],
          summary: "The console's audit log: members' changes, sign-ins and sign-outs, newest first",
          querystring: ListQuery,
          response: { 200: AuditPage, 403: Problem, ...errorResponses },
        },
      },
      async (request) => audit.list(authOf(request).providerId, request.query),
    );
  };
}
