import { Type } from '@sinclair/typebox';
import { Timestamp } from '../../http/schemas';

/** PUT /v1/ui/processors/stripe: the provider's Stripe keys (write-only; shown again only as last 4). */
export const StripeConnect = Type.Object(
  {
    secretKey: Type.String({
      pattern: '^(sk|rk)_(live|test)_[A-Za-z0-9]{8,247}$',
      description: 'A Stripe secret (sk_…) or restricted (rk_…) key of the account that takes the payments',
    }),
    webhookSigningSecret: Type.String({
      pattern: '^whsec_[A-Za-z0-9+/=]{8,250}$',
      description: "The signing secret of the Stripe webhook endpoint pointed at this service's URL",
    }),
  },
  { additionalProperties: false },
);

export const StripeConnection = Type.Union([
  Type.Object({
    connected: Type.Literal(true),
    last4: Type.String(),
    mode: Type.Union([Type.Literal('live'), Type.Literal('test')], {
      description: "Stripe's own mode of the key: test-mode keys take no real money",
    }),
    account: Type.String({ description: 'The Stripe account (acct_…) the key belongs to' }),
    connectedAt: Timestamp,
  }),
  Type.Object({ connected: Type.Literal(false) }),
]);

export const StripeWebhookParams = Type.Object({
  providerId: Type.String({ minLength: 1, maxLength: 100 }),
});

export const StripeWebhookReceipt = Type.Object({
  received: Type.Literal(true),
  id: Type.String(),
  type: Type.String(),
  outcome: Type.String({
    description:
      'applied, duplicate (already applied), ignored (a type we do not use), unmatched:… or refused:…',
  }),
});

export const ReconciliationQuery = Type.Object(
  {
    from: Type.String({ format: 'date-time', description: 'Start of the window (inclusive)' }),
    to: Type.String({
      format: 'date-time',
      description: 'End of the window (exclusive); at most 93 days after from',
    }),
  },
  { additionalProperties: false },
);

const Movement = Type.Object({
  kind: Type.String(),
  stripeId: Type.String(),
  amount: Type.Integer(),
  currency: Type.String(),
  ref: Type.String({ description: "Our id, or Stripe's balance transaction (txn_…)" }),
});

export const ReconciliationReport = Type.Object({
  from: Timestamp,
  to: Timestamp,
  matched: Type.Integer(),
  missingAtStripe: Type.Array(Movement),
  missingHere: Type.Array(Movement),
  amountMismatches: Type.Array(Type.Object({ ours: Movement, stripe: Movement })),
  stripeFees: Type.Record(Type.String(), Type.Integer()),
  balanced: Type.Boolean(),
});
