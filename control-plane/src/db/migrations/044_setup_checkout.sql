-- A checkout session may collect a card alone (issue 64: the portal's "add a card"), as Stripe
-- Checkout's setup mode does: kind 'setup', amount 0, nothing charged when it is completed.
ALTER TABLE checkout_sessions DROP CONSTRAINT checkout_sessions_kind_check;
ALTER TABLE checkout_sessions ADD CONSTRAINT checkout_sessions_kind_check
    CHECK (kind IN ('plan', 'topup', 'setup'));
