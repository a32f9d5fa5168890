-- A checkout that requires a tax ID (docs/billing.md, billing details at checkout), as Stripe
-- Checkout's tax_id_collection[required] = if_supported: a customer who has none gives one.
ALTER TABLE checkout_sessions
    ADD COLUMN tax_id_required boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT checkout_sessions_tax_id_required CHECK (NOT tax_id_required OR tax_id_collection);
