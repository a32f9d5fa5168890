-- A customer changing their email address in the portal proves the new one with a code mailed
-- to it (portal/details.ts). Those codes live beside the sign-in codes, each with its purpose: a
-- code of one purpose is unknown to the other, so a code that confirms an address never signs
-- anyone in, and a sign-in code never changes an address.
ALTER TABLE portal_sign_in_codes
    ADD COLUMN purpose text NOT NULL DEFAULT 'sign_in' CHECK (purpose IN ('sign_in', 'email_change'));
