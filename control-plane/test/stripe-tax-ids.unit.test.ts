import { describe, expect, it } from 'vitest';
import { normalizeTaxIds } from '../src/billing-details';
import { stripeTaxIdValue } from '../src/modules/processors/stripe';

/** Our tax ids (kept without separators) as the Stripe customer is sent them. */
describe("tax ids in Stripe's writing", () => {
  it('puts back the separators Stripe documents, and leaves the other kinds as kept', () => {
    const kept = (type: string, value: string) =>
      normalizeTaxIds([{ type, value } as Parameters<typeof normalizeTaxIds>[0][number]], '/taxIds', [])[0]
        ?.value as string;
    expect(stripeTaxIdValue('us_ein', kept('us_ein', '12-3456789'))).toBe('12-3456789');
    expect(stripeTaxIdValue('br_cnpj', kept('br_cnpj', '01.234.456/5432-10'))).toBe('01.234.456/5432-10');
    expect(stripeTaxIdValue('ch_vat', kept('ch_vat', 'CHE-123.456.789 MWST'))).toBe('CHE-123.456.789 MWST');
    expect(stripeTaxIdValue('ch_vat', kept('ch_vat', 'che123456789'))).toBe('CHE-123.456.789');
    expect(stripeTaxIdValue('eu_vat', kept('eu_vat', 'de 123 456 789'))).toBe('DE123456789');
    // A value not of the kind's form is sent as it is (Stripe then says what it wants).
    expect(stripeTaxIdValue('us_ein', '12345')).toBe('12345');
  });
});
