import { Type } from '@sinclair/typebox';
import { ListQuery, page, stringEnum, Timestamp } from '../../http/schemas';
import { MAIL_KINDS } from './repository';

const kindFlags = {
  paymentFailed: Type.Boolean({
    description:
      'A recurring payment failed (purchase.past_due: the day of the next try, and where to pay now) or a trial ended unpaid (purchase.suspended)',
  }),
  trialEnding: Type.Boolean({ description: 'A trial ends soon (purchase.trial_ending)' }),
  upcomingRenewal: Type.Boolean({ description: 'A renewal is coming up (purchase.renewal_reminder)' }),
  receipts: Type.Boolean({ description: 'A payment was taken (payment.succeeded)' }),
  refunds: Type.Boolean({ description: 'A refund was made (payment.refunded)' }),
  autoTopUpFailed: Type.Boolean({
    description:
      'An automatic credit top-up could not be paid (credits.auto_topup_failed: when it is tried again, or that it stopped)',
  }),
  expiringCards: Type.Boolean({
    description:
      'The default card expires at the end of this month and will be charged again (customer.card_expiring)',
  }),
  cancellations: Type.Boolean({
    description:
      'A plan was cancelled: to end with its period (purchase.cancellation_scheduled: the day it ends, and where to keep it), or it ended, at once, at the period’s end or after failed payments (purchase.cancelled)',
  }),
};

/** Which mails go to this environment's customers; none until turned on. */
export const CustomerEmailSettings = Type.Object(kindFlags);

export const CustomerEmailUpdate = Type.Object(
  {
    paymentFailed: Type.Optional(kindFlags.paymentFailed),
    trialEnding: Type.Optional(kindFlags.trialEnding),
    upcomingRenewal: Type.Optional(kindFlags.upcomingRenewal),
    receipts: Type.Optional(kindFlags.receipts),
    refunds: Type.Optional(kindFlags.refunds),
    autoTopUpFailed: Type.Optional(kindFlags.autoTopUpFailed),
    expiringCards: Type.Optional(kindFlags.expiringCards),
    cancellations: Type.Optional(kindFlags.cancellations),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const CustomerMail = Type.Object({
  id: Type.String({ description: 'cml_…' }),
  kind: stringEnum(MAIL_KINDS),
  status: stringEnum(
    ['pending', 'sent', 'logged', 'skipped', 'failed'] as const,
    'pending: to be sent (or tried again); sent; logged: written to the service’s log instead, never sent (MAIL_TO_LOG, development without SMTP_URL); skipped: nobody to send it to (no address, or the customer deleted); failed: every attempt refused',
  ),
  customerRef: Type.String(),
  event: Type.String({ description: 'The event it is about (evt_…)' }),
  to: Type.Union([Type.String(), Type.Null()], {
    description: 'The address it went to, once sent (or logged)',
  }),
  subject: Type.Union([Type.String(), Type.Null()]),
  attempts: Type.Integer(),
  lastError: Type.Union([Type.String(), Type.Null()], {
    description: 'Why the last attempt did not send it',
  }),
  createdAt: Timestamp,
  sentAt: Type.Union([Timestamp, Type.Null()]),
});

export const CustomerMailPage = page(CustomerMail);

export const CustomerMailQuery = Type.Object(
  {
    ...ListQuery.properties,
    customerRef: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description: 'Only mails to this customer (id or externalRef)',
      }),
    ),
  },
  { additionalProperties: false },
);
