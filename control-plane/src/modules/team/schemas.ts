import { Type } from '@sinclair/typebox';
import { Nullable, page, stringEnum } from '../../http/schemas';
import { ROLES } from './repository';

export const SignInBody = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    providerId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: 'The provider to sign in to, for an account that belongs to several',
      }),
    ),
  },
  { additionalProperties: false },
);

export const PasswordChange = Type.Object(
  {
    currentPassword: Type.String({ minLength: 1, maxLength: 1024 }),
    newPassword: Type.String({ minLength: 8, maxLength: 1024 }),
  },
  { additionalProperties: false },
);

export const Session = Type.Object({
  id: Type.String({ description: 'Session id (ses_…)' }),
  user: Type.Object({ id: Type.String(), email: Type.String() }),
  provider: Type.Object({ id: Type.String(), displayName: Type.String(), liveEnabled: Type.Boolean() }),
  role: stringEnum(ROLES),
  csrfToken: Type.String({
    description: 'Send it in the X-CSRF-Token header with every call that changes something',
  }),
  createdAt: Type.String({ format: 'date-time' }),
  expiresAt: Type.String({ format: 'date-time', description: 'The session ends then, used or not' }),
  idleExpiresAt: Type.String({
    format: 'date-time',
    description: 'It ends then unless used before (30 minutes of idleness)',
  }),
});

export const CsrfHeader = Type.Object({
  'x-csrf-token': Type.Optional(Type.String({ maxLength: 200, description: 'The session’s csrfToken' })),
});

export const AuditEvent = Type.Object({
  id: Type.String({ description: 'Audit event id (aud_…)' }),
  createdAt: Type.String({ format: 'date-time' }),
  actor: Type.Object({ userId: Type.String(), email: Type.String(), role: stringEnum(ROLES) }),
  environment: Nullable(
    Type.String({ description: 'Where the change was made; null for a sign-in or sign-out' }),
  ),
  operation: Type.String({ description: 'The operationId of what was called (createProduct)' }),
  method: Type.String(),
  path: Type.String(),
  status: Type.Integer({ description: 'How the request ended' }),
  requestId: Type.String(),
  address: Nullable(Type.String()),
  userAgent: Nullable(Type.String()),
});

export const AuditPage = page(AuditEvent);

const Email = Type.String({ format: 'email', maxLength: 254 });
const Secret = Type.String({ minLength: 1, maxLength: 200 });

export const SignupBody = Type.Object(
  {
    email: Email,
    password: Type.String({ minLength: 1, maxLength: 1024, description: 'At least 8 characters' }),
    businessName: Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'What you sell under: the new provider’s display name',
    }),
  },
  { additionalProperties: false },
);

export const SignupStarted = Type.Object({
  verificationId: Type.String({ description: 'Sign-up id (sgn_…): verify it with the mailed code' }),
  email: Type.String(),
  expiresAt: Type.String({ format: 'date-time', description: 'The code works until then' }),
});

export const VerifyBody = Type.Object(
  { code: Type.String({ minLength: 1, maxLength: 20, description: 'The six digits mailed' }) },
  { additionalProperties: false },
);

export const TokenBody = Type.Object(
  { token: Type.String({ minLength: 1, maxLength: 200, description: 'The secret of the invitation link' }) },
  { additionalProperties: false },
);

export const AcceptBody = Type.Object(
  {
    token: Secret,
    password: Type.String({
      minLength: 1,
      maxLength: 1024,
      description: 'The account’s password, or a new one (8 characters or more) for a new account',
    }),
  },
  { additionalProperties: false },
);

export const InvitationPreview = Type.Object({
  provider: Type.Object({ id: Type.String(), displayName: Type.String() }),
  email: Type.String(),
  role: stringEnum(ROLES),
  accountExists: Type.Boolean({ description: 'Sign in with its password, rather than choose one' }),
  expiresAt: Type.String({ format: 'date-time' }),
});

export const Member = Type.Object({
  userId: Type.String({ description: 'Console user id (usr_…)' }),
  email: Type.String(),
  role: stringEnum(ROLES),
  joinedAt: Type.String({ format: 'date-time' }),
});

export const Invitation = Type.Object({
  id: Type.String({ description: 'Invitation id (ivt_…)' }),
  email: Type.String(),
  role: stringEnum(ROLES),
  invitedBy: Nullable(Type.String({ description: 'The inviting member’s email; null when a key sent it' })),
  createdAt: Type.String({ format: 'date-time' }),
  expiresAt: Type.String({ format: 'date-time' }),
});

export const Team = Type.Object({
  members: Type.Array(Member),
  invitations: Type.Array(Invitation, { description: 'Open invitations, newest first' }),
});

export const InviteBody = Type.Object(
  { email: Email, role: stringEnum(ROLES) },
  { additionalProperties: false },
);
export const RoleBody = Type.Object({ role: stringEnum(ROLES) }, { additionalProperties: false });
export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
export const UserParams = Type.Object({ userId: Type.String({ minLength: 1, maxLength: 100 }) });
