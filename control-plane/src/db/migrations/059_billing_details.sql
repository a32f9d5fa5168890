-- Who a bill is to and from (billing-details.ts): a postal address and tax ids for customers, a
-- postal address for providers (their tax id, VAT and company numbers are older columns), and on
-- each invoice a copy of both parties' details as they stood when it was finalized. A bill once
-- issued keeps the address and tax ids it was issued to, however the customer changes later, as
-- Stripe's invoices keep customer_address and customer_tax_ids.
ALTER TABLE customers
    ADD COLUMN address jsonb,
    ADD COLUMN tax_ids jsonb NOT NULL DEFAULT '[]';
ALTER TABLE providers ADD COLUMN address jsonb;
ALTER TABLE invoices
    ADD COLUMN billed_to jsonb,
    ADD COLUMN issuer jsonb;

-- Invoices issued before this: the parties' details as they stand now, the nearest there is.
UPDATE invoices i SET
    billed_to = jsonb_build_object('name', c.name, 'email', c.email, 'address', c.address, 'taxIds', c.tax_ids),
    issuer = jsonb_build_object('legalName', p.legal_name, 'companyNumber', p.company_number,
                                'address', p.address, 'taxId', p.tax_id, 'vatNumber', p.vat_number)
  FROM customers c, providers p
 WHERE c.id = i.customer_id AND p.id = i.provider_id;

-- Every write of an invoice that is (or was, until this write) a draft copies both parties' current
-- details onto it; the write that finalizes it is the last such write, so from then on the copy
-- stands. A trigger, so that no way of issuing an invoice, now or later, can forget the copy.
CREATE FUNCTION invoice_parties() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR OLD.status = 'draft' THEN
        SELECT jsonb_build_object('name', c.name, 'email', c.email, 'address', c.address, 'taxIds', c.tax_ids)
          INTO NEW.billed_to FROM customers c WHERE c.id = NEW.customer_id;
        SELECT jsonb_build_object('legalName', p.legal_name, 'companyNumber', p.company_number,
                                  'address', p.address, 'taxId', p.tax_id, 'vatNumber', p.vat_number)
          INTO NEW.issuer FROM providers p WHERE p.id = NEW.provider_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER invoice_parties BEFORE INSERT OR UPDATE ON invoices
    FOR EACH ROW EXECUTE FUNCTION invoice_parties();
