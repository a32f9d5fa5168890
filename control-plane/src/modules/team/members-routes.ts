import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import type { ConsoleAudit } from './audit';
import type { TeamMembers } from './members';
import { problems, sendSession, withRetryAfter } from './routes';
import {
  AcceptBody,
  IdParams,
  Invitation,
  InvitationPreview,
  InviteBody,
  Member,
  RoleBody,
  Session,
  SignupBody,
  SignupStarted,
  Team,
  TokenBody,
  UserParams,
  VerifyBody,
} from './schemas';
import type { ConsoleSignups } from './signup';

/**
 * The console's doors that need no session: sign-up (a code mailed, then verified into a new
 * provider with its owner signed in) and invitation links (read, then accepted into a session).
 */
export function signupRoutes(
  signups: ConsoleSignups,
  members: TeamMembers,
  audit: ConsoleAudit,
  secureCookies: boolean,
) {
  return async (app: App) => {
    const tags = ['console'];
    app.post(
      '/v1/console/signups',
      {
        schema: {
          tags,
          summary: 'Sign up to the console: mails a six-digit code to the address',
          body: SignupBody,
          response: { 202: SignupStarted, ...problems },
        },
      },
      async (request, reply) => {
        try {
          return reply.status(202).send(await signups.start({ ...request.body, address: request.ip }));
        } catch (error) {
          withRetryAfter(reply, error);
        }
      },
    );

    app.post(
      '/v1/console/signups/:id/verify',
      {
        schema: {
          tags,
          summary: 'Verify a sign-up with the mailed code: a new provider, its owner, signed in',
          params: IdParams,
          body: VerifyBody,
          response: { 201: Session, 404: Problem, ...problems },
        },
      },
      async (request, reply) => {
        try {
          const started = await signups.verify({
            verificationId: request.params.id,
            code: request.body.code,
            address: request.ip,
            userAgent: request.headers['user-agent'],
          });
          return await sendSession(reply, request, audit, started, secureCookies);
        } catch (error) {
          withRetryAfter(reply, error);
        }
      },
    );

    app.post(
      '/v1/console/invitations/lookup',
      {
        schema: {
          tags,
          summary: 'What an invitation link offers: the team, the address, the role',
          body: TokenBody,
          response: { 200: InvitationPreview, 404: Problem, 409: Problem, ...problems },
        },
      },
      async (request, reply) => {
        reply.header('cache-control', 'no-store');
        return members.lookup(request.body.token);
      },
    );

    app.post(
      '/v1/console/invitations/accept',
      {
        schema: {
          tags,
          summary: 'Accept an invitation: join the team (a new account, or yours) and sign in',
          body: AcceptBody,
          response: { 201: Session, 404: Problem, 409: Problem, ...problems },
        },
      },
      async (request, reply) => {
        try {
          const started = await members.accept({
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
  };
}

/** The team, managed by owners and admins (the role rules) and by the provider's keys. */
export function memberRoutes(members: TeamMembers) {
  return async (app: App) => {
    const tags = ['console'];
    app.get(
      '/v1/ui/team',
      {
        schema: {
          tags,
          summary: 'The team: members with their roles, and open invitations',
          response: { 200: Team, ...errorResponses },
        },
      },
      async (request) => members.list(authOf(request).providerId),
    );

    app.post(
      '/v1/ui/team/invitations',
      {
        schema: {
          tags,
          summary: 'Invite someone by email to join the team with a role (a link valid 7 days)',
          body: InviteBody,
          response: { 201: Invitation, 403: Problem, 409: Problem, 503: Problem, ...errorResponses },
        },
      },
      async (request, reply) => {
        try {
          return reply.status(201).send(await members.invite(authOf(request), request.body));
        } catch (error) {
          withRetryAfter(reply, error);
        }
      },
    );

    app.delete(
      '/v1/ui/team/invitations/:id',
      {
        schema: {
          tags,
          summary: 'Revoke an open invitation: its link stops working',
          params: IdParams,
          response: {
            200: Type.Object({ id: Type.String(), revoked: Type.Literal(true) }),
            ...errorResponses,
          },
        },
      },
      async (request) => {
        await members.revokeInvitation(authOf(request).providerId, request.params.id);
        return { id: request.params.id, revoked: true as const };
      },
    );

    app.patch(
      '/v1/ui/team/members/:userId',
      {
        schema: {
          tags,
          summary: "Change a member's role (only owners touch the owner role; one owner always stays)",
          params: UserParams,
          body: RoleBody,
          response: { 200: Member, 403: Problem, 409: Problem, ...errorResponses },
        },
      },
      async (request) => members.changeRole(authOf(request), request.params.userId, request.body.role),
    );

    app.delete(
      '/v1/ui/team/members/:userId',
      {
        schema: {
          tags,
          summary: 'Remove a member: their console sessions here end at once',
          params: UserParams,
          response: {
            200: Type.Object({ userId: Type.String(), removed: Type.Literal(true) }),
            403: Problem,
            409: Problem,
            ...errorResponses,
          },
        },
      },
      async (request) => {
        await members.remove(authOf(request), request.params.userId);
        return { userId: request.params.userId, removed: true as const };
      },
    );
  };
}
