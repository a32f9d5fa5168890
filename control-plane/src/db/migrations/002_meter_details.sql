ALTER TABLE meters ADD COLUMN description text;
CREATE INDEX meters_provider ON meters (provider_id, environment, id);
