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
