-- The same card stored twice (each hosted checkout saves the card it was paid with) is one card
-- (issue 64): a card's fingerprint (Stripe's card.fingerprint; the test card in sandbox) finds it,
-- and the card stored again replaces its processor reference instead of adding a row.
ALTER TABLE payment_methods ADD COLUMN fingerprint text;
UPDATE payment_methods SET fingerprint = processor_ref WHERE processor = 'sandbox';
