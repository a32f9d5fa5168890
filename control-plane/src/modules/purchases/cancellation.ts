import { type Static, Type } from '@sinclair/typebox';
import { ValidationError } from '../../errors';
import { Nullable, stringEnum, Timestamp } from '../../http/schemas';

/**
 * Why a purchase was cancelled, as Stripe keeps a subscription's `cancellation_details`: the
 * reason (asked for through the API or the portal, or the card failed until dunning gave up) and,
 * when the customer gave them, their feedback (Stripe's choices) and a comment.
 */
export const CANCELLATION_FEEDBACK = [
  'too_expensive',
  'missing_features',
  'switched_service',
  'unused',
  'customer_service',
  'too_complex',
  'low_quality',
  'other',
] as const;
export type CancellationFeedback = (typeof CANCELLATION_FEEDBACK)[number];

/** The feedback choices as the portal words them. */
export const FEEDBACK_WORDS: Record<CancellationFeedback, string> = {
  too_expensive: 'It’s too expensive',
  missing_features: 'Some features are missing',
  switched_service: 'I’m switching to another service',
  unused: 'I don’t use it enough',
  customer_service: 'Customer service was less than expected',
  too_complex: 'It’s too hard to use',
  low_quality: 'Quality was less than expected',
  other: 'Other reason',
};

export interface CancellationDetails {
  reason: 'cancellation_requested' | 'payment_failed';
  feedback: CancellationFeedback | null;
  comment: string | null;
  /** When it was asked for (or dunning gave up), ISO 8601: what cancellation analytics count by. */
  requestedAt: string;
}

/** What a cancellation request may say of why (the API's body, the portal's form). */
export const CancellationInput = Type.Object(
  {
    feedback: Type.Optional(stringEnum(CANCELLATION_FEEDBACK, "The customer's reason, in Stripe's choices")),
    comment: Type.Optional(
      Type.String({
        maxLength: 500,
        pattern: '^[^\\u0000-\\u0008\\u000b-\\u001f\\u007f]*$',
        description: "The customer's own words (up to 500 characters; lines and tabs kept)",
      }),
    ),
  },
  { additionalProperties: false },
);
export type CancellationInput = Static<typeof CancellationInput>;

export const CancellationDetailsSchema = Type.Union(
  [
    Type.Object({
      reason: stringEnum(
        ['cancellation_requested', 'payment_failed'] as const,
        'cancellation_requested: through the API or the portal; payment_failed: dunning ended it',
      ),
      feedback: Nullable(stringEnum(CANCELLATION_FEEDBACK)),
      comment: Nullable(Type.String()),
      requestedAt: Timestamp,
    }),
    Type.Null(),
  ],
  {
    description:
      'Why it was cancelled (Stripe’s cancellation_details); null unless cancelled or scheduled to be',
  },
);

/** How a cancellation is asked for: when, the refund of unused time, and why. */
export interface CancelOptions {
  atPeriodEnd?: boolean | undefined;
  prorate?: boolean | undefined;
  prorationDate?: string | undefined;
  cancellationDetails?: CancellationInput | undefined;
}

/** The details a cancellation asked for at `at` keeps: a blank comment is none. */
export function requested(options: CancelOptions, at: Date): CancellationDetails {
  const comment = options.cancellationDetails?.comment?.trim() ?? '';
  return {
    reason: 'cancellation_requested',
    feedback: options.cancellationDetails?.feedback ?? null,
    comment: comment === '' ? null : comment,
    requestedAt: at.toISOString(),
  };
}

/** Dunning gave up on the card at `at`. */
export const paymentFailed = (at: Date): CancellationDetails => ({
  reason: 'payment_failed',
  feedback: null,
  comment: null,
  requestedAt: at.toISOString(),
});

/**
 * Why, as a form gives it (the portal's cancel page): an empty choice or comment is none; a
 * choice not offered, a comment over 500 characters or with control characters is 400.
 */
export function cancellationFromForm(feedback: string, comment: string): CancellationInput {
  const problems: Array<{ path: string; message: string; location: 'body' }> = [];
  const chosen = feedback.trim();
  if (chosen !== '' && !(CANCELLATION_FEEDBACK as readonly string[]).includes(chosen))
    problems.push({ path: '/feedback', message: 'is not one of the reasons offered', location: 'body' });
  // A textarea's lines end in CR LF.
  const words = comment.replace(/\r\n?/g, '\n').trim();
  if (words.length > 500)
    problems.push({ path: '/comment', message: 'is longer than 500 characters', location: 'body' });
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
  else if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(words))
    problems.push({ path: '/comment', message: 'must not hold control characters', location: 'body' });
  if (problems.length > 0) throw new ValidationError(problems);
  return {
    ...(chosen === '' ? {} : { feedback: chosen as CancellationFeedback }),
    ...(words === '' ? {} : { comment: words }),
  };
}
