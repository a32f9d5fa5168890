import { Type } from '@sinclair/typebox';
import { Timestamp } from '../../http/schemas';

export const PortalSessionCreate = Type.Object(
  {
    customerRef: Type.String({
      minLength: 1,
      maxLength: 255,
      description: 'The customer (cus_… or your externalRef)',
    }),
    returnUrl: Type.Optional(
      Type.String({
        format: 'uri',
        pattern: '^https?://',
        maxLength: 2048,
        description: 'Where the portal’s “Back” link and sign-out take the customer (http or https)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const PortalSession = Type.Object({
  id: Type.String({ description: 'bps_…' }),
  customerRef: Type.String(),
  url: Type.String({
    description: 'Open it once, within 15 minutes: it signs the browser in to this customer’s portal',
  }),
  returnUrl: Type.Union([Type.String(), Type.Null()]),
  expiresAt: Timestamp,
});
