-- A customer mail written to the log instead of sent (MAIL_TO_LOG, development without SMTP_URL)
-- is `logged`, not `sent`: nobody received it, and the console and API say so.
ALTER TABLE customer_mails DROP CONSTRAINT customer_mails_status_check;
ALTER TABLE customer_mails ADD CONSTRAINT customer_mails_status_check
    CHECK (status IN ('pending', 'sent', 'logged', 'skipped', 'failed'));
