-- The paywall funnel: which checkout sessions the paywall offered (rather than the API), and when
-- a session's page was first opened (paying opens it, if nothing did before).
ALTER TABLE checkout_sessions
    ADD COLUMN source text NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'paywall')),
    ADD COLUMN opened_at timestamptz;
UPDATE checkout_sessions SET opened_at = completed_at WHERE completed_at IS NOT NULL;
CREATE INDEX checkout_sessions_paywall ON checkout_sessions (provider_id, environment, created_at)
    WHERE source = 'paywall';
