-- The colour of the provider's hosted pages (checkout, sign-in, invoices): a lowercase #rrggbb,
-- so a stored value can only ever be a colour when it is written into a page's CSS.
ALTER TABLE providers ADD COLUMN brand_color text CHECK (brand_color ~ '^#[0-9a-f]{6}$');
