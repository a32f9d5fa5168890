-- A portal browser left alone is signed out (issue 64): last_seen_at moves with every page and
-- form, and a session unseen for the idle timeout no longer signs anyone in, within its hour.
ALTER TABLE portal_sessions ADD COLUMN last_seen_at timestamptz;
UPDATE portal_sessions SET last_seen_at = created_at;
ALTER TABLE portal_sessions ALTER COLUMN last_seen_at SET NOT NULL;
