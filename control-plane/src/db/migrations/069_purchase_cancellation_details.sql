-- Why a purchase was cancelled (docs/billing.md), as Stripe keeps a subscription's
-- cancellation_details: the reason (the customer or provider asked, a payment failed), and the
-- customer's feedback (one of Stripe's choices) and comment when they gave them. Null until a
-- cancellation; a reactivation clears it.
ALTER TABLE purchases ADD COLUMN cancellation_details jsonb;
