import { Type } from '@sinclair/typebox';
import { Nullable } from '../../http/schemas';
import { MAX_ROLL_OVERLAP_SECONDS } from './service';

export const ApiKey = Type.Object({
  id: Type.String({ description: 'API key id (key_…)' }),
  name: Nullable(Type.String()),
  hint: Type.String({ description: 'The key’s prefix and last four characters (sk_test_…a1b2)' }),
  createdBy: Nullable(Type.String({ description: 'The member who made it; null for the CLI’s keys' })),
  createdAt: Type.String({ format: 'date-time' }),
  expiresAt: Nullable(
    Type.String({ format: 'date-time', description: 'When a rolled key stops working; null: no end' }),
  ),
});

export const ApiKeyList = Type.Object({ data: Type.Array(ApiKey) });

const Secret = Type.String({ description: 'The secret key, shown this once: store it now' });

export const CreatedApiKey = Type.Intersect([ApiKey, Type.Object({ secret: Secret })]);

export const RolledApiKey = Type.Intersect([ApiKey, Type.Object({ secret: Secret, rolled: ApiKey })]);

export const CreateBody = Type.Object(
  { name: Type.Optional(Type.String({ maxLength: 100, description: 'What the key is for' })) },
  { additionalProperties: false },
);

export const RollBody = Type.Object(
  {
    overlapSeconds: Type.Integer({
      minimum: 0,
      maximum: MAX_ROLL_OVERLAP_SECONDS,
      default: 0,
      description: 'How long the old secret keeps working (0: it stops now; at most 7 days)',
    }),
  },
  { additionalProperties: false },
);

export const KeyParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
