-- Clients identified by a Client ID Metadata Document (an https client_id): the row is the cached
-- copy of the document, shared by every control-plane process, refetched once it expires. NULL for
-- clients registered through dynamic registration, which never expire.
ALTER TABLE oauth_clients ADD COLUMN metadata_expires_at timestamptz;
