-- The console's audit log (issue 62): every change a member makes through the API with their
-- session (who, what, when, from where, and how it ended), and their sign-ins and sign-outs.
-- Ids are ULIDs: newest first is id order.
CREATE TABLE console_audit_events (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    -- The environment a change was made in; null for sign-ins and sign-outs (not of one).
    environment text,
    user_id text NOT NULL REFERENCES console_users (id),
    email text NOT NULL,
    role text NOT NULL,
    session_id text NOT NULL,
    -- The operation's operationId (createProduct), as /openapi.json names it.
    operation text NOT NULL,
    method text NOT NULL,
    path text NOT NULL,
    status integer NOT NULL,
    request_id text NOT NULL,
    address text,
    user_agent text,
    created_at timestamptz NOT NULL
);
CREATE INDEX console_audit_events_provider ON console_audit_events (provider_id, id DESC);
