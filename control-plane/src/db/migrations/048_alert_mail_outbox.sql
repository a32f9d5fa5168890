-- An alert's mail is written with its firing, in the same transaction, and sent after the commit
-- (issue 64): a crash between the two no longer loses it. mail_attempt_at is a lease on sending
-- (whoever set it last sends; another pass takes it over five minutes later), mailed_at says it
-- went. Firings before this have no mail to send (mail_to null).
ALTER TABLE usage_alert_firings
    ADD COLUMN mail_to text,
    ADD COLUMN mail_subject text,
    ADD COLUMN mail_text text,
    ADD COLUMN mail_attempt_at timestamptz,
    ADD COLUMN mailed_at timestamptz;
CREATE INDEX usage_alert_firings_unmailed ON usage_alert_firings (fired_at)
    WHERE mail_to IS NOT NULL AND mailed_at IS NULL;
