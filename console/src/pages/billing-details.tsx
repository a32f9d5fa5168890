import { countries, countryName, TAX_ID_TYPES, taxIdLabel } from '@mcp-meter/contracts/billing-details';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { Field, FormProblem, Table } from '../ui';

/**
 * Who an invoice is to and from: the postal address both parties keep, the provider's legal
 * details, and a customer's tax ids. Invoices copy them as they stand when finalized
 * (docs/billing.md), so what is changed here reaches the next invoice, never an issued one.
 */

const PARTS = ['line1', 'line2', 'city', 'state', 'postalCode', 'country'] as const;
type Part = (typeof PARTS)[number];
type AddressForm = Record<Part, string>;
type Address = { [K in Part]: string | null } | null | undefined;

const COUNTRIES = countries();

const formOf = (address: Address): AddressForm =>
  Object.fromEntries(PARTS.map((part) => [part, address?.[part] ?? ''])) as AddressForm;

/** What to send for an address form: the parts filled in, or null when none is. */
export function addressBody(form: AddressForm): Partial<AddressForm> | null {
  const parts = Object.fromEntries(
    PARTS.map((part) => [part, form[part].trim()] as const).filter(([, value]) => value !== ''),
  );
  return Object.keys(parts).length === 0 ? null : parts;
}

/** An address as one line of text, or a dash. */
export function addressText(address: Address): string {
  if (address === null || address === undefined) return '—';
  const country = address.country === null ? null : countryName(address.country);
  return [address.line1, address.line2, address.city, address.state, address.postalCode, country]
    .filter((part) => part !== null && part !== '')
    .join(', ');
}

/** The six parts of an address, each with the API's message for it under it. */
function AddressFields(props: {
  value: AddressForm;
  onChange: (next: AddressForm) => void;
  error: unknown;
  /** `billing` for a customer's address (an autofill section); the issuer's has none. */
  prefix: 'billing' | 'issuer';
}) {
  const set = (part: Part) => (value: string) => props.onChange({ ...props.value, [part]: value });
  const field = (part: Exclude<Part, 'country'>, label: string, autoComplete: string) => (
    <Field
      label={label}
      name={`address/${part}`}
      value={props.value[part]}
      onChange={set(part)}
      error={props.error}
      autoComplete={props.prefix === 'billing' ? `billing ${autoComplete}` : autoComplete}
    />
  );
  const id = `field-${props.prefix}-country`;
  return (
    <>
      {field('line1', 'Address line 1', 'address-line1')}
      {field('line2', 'Address line 2', 'address-line2')}
      {field('city', 'City', 'address-level2')}
      {field('state', 'State, county or region', 'address-level1')}
      {field('postalCode', 'Postal code', 'postal-code')}
      <div className="field">
        <label htmlFor={id}>Country</label>
        <select id={id} value={props.value.country} onChange={(event) => set('country')(event.target.value)}>
          <option value="">None</option>
          {COUNTRIES.map(({ code, name }) => (
            <option key={code} value={code}>
              {name}
            </option>
          ))}
        </select>
      </div>
    </>
  );
}

type Merchant = {
  legalName: string;
  companyNumber?: string;
  vatNumber?: string;
  taxId?: string;
  address?: Address;
};
const LEGAL = ['legalName', 'companyNumber', 'vatNumber', 'taxId'] as const;

/** Settings: the legal name, numbers and postal address every invoice is issued under. */
export function InvoiceIssuer(props: { merchant: Merchant; canChange: boolean }) {
  const client = useQueryClient();
  const initial = Object.fromEntries(LEGAL.map((f) => [f, props.merchant[f] ?? ''])) as Record<
    (typeof LEGAL)[number],
    string
  >;
  const [form, setForm] = useState(initial);
  const [address, setAddress] = useState(formOf(props.merchant.address));
  const save = useMutation({
    mutationFn: () => {
      const body: Record<string, unknown> = {};
      for (const field of LEGAL) {
        const value = form[field].trim();
        if (value !== initial[field]) body[field] = value === '' && field !== 'legalName' ? null : value;
      }
      body.address = addressBody(address);
      return unwrap(api.PATCH('/v1/sdk/merchant', { body }));
    },
    onSuccess: (next) => client.setQueryData(['merchant'], next),
  });
  const set = (field: (typeof LEGAL)[number]) => (value: string) =>
    setForm((f) => ({ ...f, [field]: value }));
  return (
    <form
      className="card"
      aria-labelledby="issuer-title"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <h2 id="issuer-title">On invoices</h2>
      <p className="muted">
        Who the invoices are from. Each invoice keeps what it was issued with; changes reach the next one.
      </p>
      <fieldset disabled={!props.canChange} className="views">
        <legend className="visually-hidden">Invoice issuer</legend>
        <Field
          label="Legal name"
          name="legalName"
          value={form.legalName}
          onChange={set('legalName')}
          error={save.error}
        />
        <Field
          label="Company number"
          name="companyNumber"
          value={form.companyNumber}
          onChange={set('companyNumber')}
          error={save.error}
        />
        <Field
          label="VAT number"
          name="vatNumber"
          value={form.vatNumber}
          onChange={set('vatNumber')}
          error={save.error}
          hint="Country prefix, e.g. GB123456789"
        />
        <Field label="Tax ID" name="taxId" value={form.taxId} onChange={set('taxId')} error={save.error} />
        <AddressFields value={address} onChange={setAddress} error={save.error} prefix="issuer" />
      </fieldset>
      <FormProblem error={save.error} fields={[...LEGAL, 'address']} />
      {save.isSuccess && <p role="status">Saved: the next invoices show it.</p>}
      {props.canChange && (
        <button type="submit" className="primary" disabled={save.isPending}>
          Save invoice details
        </button>
      )}
    </form>
  );
}

type TaxId = {
  type: string;
  value: string;
  verification?: { status: string; verifiedName: string | null } | null;
};
type Customer = {
  id: string;
  address: Address;
  taxIds: TaxId[];
};

/** What the processor's check against the tax registry found, in words (docs/billing.md). */
const REGISTRY: Record<string, string> = {
  pending: 'Being checked',
  verified: 'Verified',
  unverified: 'Not found in the registry',
  unavailable: 'Registry unavailable',
};
function registryText(taxId: TaxId): string {
  const v = taxId.verification;
  if (v === null || v === undefined) return 'Not checked';
  const text = REGISTRY[v.status] ?? v.status;
  return v.verifiedName === null ? text : `${text}: ${v.verifiedName}`;
}

/** One customer's billing address and tax ids, and (for a manager) the forms that change them. */
export function CustomerBillingDetails(props: { customer: Customer; canChange: boolean }) {
  const client = useQueryClient();
  const [address, setAddress] = useState(formOf(props.customer.address));
  const [kind, setKind] = useState('eu_vat');
  const [number, setNumber] = useState('');
  const patch = (body: Record<string, unknown>) =>
    unwrap(api.PATCH('/v1/sdk/customers/{ref}', { params: { path: { ref: props.customer.id } }, body }));
  // The page may hold the customer under its externalRef: every copy is read again.
  const done = () => client.invalidateQueries({ queryKey: ['customer'] });
  const saveAddress = useMutation({
    mutationFn: () => patch({ address: addressBody(address) }),
    onSuccess: done,
  });
  const taxIds = useMutation({
    // Kind and number only: what the registry said is the processor's, not ours to send.
    mutationFn: (next: TaxId[]) => patch({ taxIds: next.map((t) => ({ type: t.type, value: t.value })) }),
    onSuccess: () => {
      setNumber('');
      return done();
    },
  });
  const kindId = 'field-tax-id-kind';
  return (
    <section aria-labelledby="billing-details-title">
      <h2 id="billing-details-title">Billing details</h2>
      <p>
        Address: <span data-testid="customer-address">{addressText(props.customer.address)}</span>
      </p>
      {props.customer.taxIds.length === 0 ? (
        <p>No tax IDs.</p>
      ) : (
        <Table
          caption="Tax IDs"
          rows={props.customer.taxIds}
          rowKey={(taxId) => `${taxId.type}:${taxId.value}`}
          columns={[
            { header: 'Kind', cell: (taxId) => taxIdLabel(taxId.type) },
            { header: 'Number', cell: (taxId) => <code>{taxId.value}</code> },
            { header: 'Registry', cell: registryText },
            ...(props.canChange
              ? [
                  {
                    header: 'Change',
                    cell: (taxId: TaxId) => (
                      <button
                        type="button"
                        aria-label={`Remove ${taxIdLabel(taxId.type)} ${taxId.value}`}
                        disabled={taxIds.isPending}
                        onClick={() =>
                          taxIds.mutate(props.customer.taxIds.filter((other) => other !== taxId))
                        }
                      >
                        Remove
                      </button>
                    ),
                  },
                ]
              : []),
          ]}
        />
      )}
      {props.canChange && (
        <>
          <form
            className="card"
            aria-labelledby="tax-id-title"
            noValidate
            onSubmit={(event) => {
              event.preventDefault();
              taxIds.mutate([...props.customer.taxIds, { type: kind, value: number }]);
            }}
          >
            <h3 id="tax-id-title">Add a tax ID</h3>
            <div className="field">
              <label htmlFor={kindId}>Kind</label>
              <select id={kindId} value={kind} onChange={(event) => setKind(event.target.value)}>
                {TAX_ID_TYPES.map((type) => (
                  <option key={type} value={type}>
                    {taxIdLabel(type)}
                  </option>
                ))}
              </select>
            </div>
            <Field label="Number" name="taxIds" value={number} onChange={setNumber} error={taxIds.error} />
            <FormProblem error={taxIds.error} fields={['taxIds']} />
            <button type="submit" className="primary" disabled={taxIds.isPending}>
              Add tax ID
            </button>
          </form>
          <form
            className="card"
            aria-labelledby="address-title"
            noValidate
            onSubmit={(event) => {
              event.preventDefault();
              saveAddress.mutate();
            }}
          >
            <h3 id="address-title">Billing address</h3>
            <AddressFields value={address} onChange={setAddress} error={saveAddress.error} prefix="billing" />
            <FormProblem error={saveAddress.error} fields={['address']} />
            {saveAddress.isSuccess && <p role="status">Saved: the next invoices show it.</p>}
            <button type="submit" className="primary" disabled={saveAddress.isPending}>
              Save address
            </button>
          </form>
        </>
      )}
    </section>
  );
}
