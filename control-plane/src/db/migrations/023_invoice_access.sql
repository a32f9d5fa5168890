-- The capability of an invoice's hosted page and PDF: whoever holds the link (the customer) can
-- read that one invoice, with no key. 64 hex characters of gen_random_uuid's randomness.
ALTER TABLE invoices ADD COLUMN access_token text;
UPDATE invoices SET access_token = replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', '');
ALTER TABLE invoices ALTER COLUMN access_token SET NOT NULL;
CREATE UNIQUE INDEX invoices_access_token ON invoices (access_token);
