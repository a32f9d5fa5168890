import type { Logger } from '@mcp-meter/contracts/kit';
import { ID, newId } from '@mcp-meter/contracts/kit';
import { Value } from '@sinclair/typebox/value';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { AddressInput, TAX_ID_TYPES, TaxId, TaxIdsInput, type TaxIdType } from '../../billing-details';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { ValidationError } from '../../errors';
import type { Mailer } from '../../mail';
import type { AuthContext } from '../../tenancy';
import { Email, Name, Telephone } from '../customers/schemas';
import type { CustomerService } from '../customers/service';
import { moveLoginEmail, releaseAttempts } from '../sign-in/repository';
import { sha256 } from '../sign-in/secrets';
import { mailCode, newCode, reserveOrRefuse } from '../sign-in/throttle';
import { CODE_TTL_MS, MAX_ATTEMPTS_PER_ADDRESS, MAX_CODES_PER_EMAIL, useMailedCode } from './codes';
import { findPortalCode, insertPortalCode } from './repository';
import type { PortalService } from './service';

type Form = { csrf?: string | undefined };

/** New addresses one customer may have codes mailed to in the throttle's window. */
const MAX_ADDRESS_CHANGES = 5;

const tenantOf = (session: { provider_id: string; environment: 'sandbox' | 'live' }): AuthContext => ({
  providerId: session.provider_id,
  environment: session.environment,
});

const invalid = (field: string, message: string) =>
  new ValidationError([{ path: `/${field}`, message, location: 'body' }]);

/** A form field as the API would take it: trimmed, empty for none, within the API's rules. */
function optional(value: string | undefined, field: string, check: (text: string) => string | null) {
  const text = (value ?? '').trim();
  if (text === '') return null;
  const problem = check(text);
  if (problem !== null) throw invalid(field, problem);
  return text;
}

const nameProblem = (text: string) => (Value.Check(Name, text) ? null : 'must be at most 200 characters');
const telephoneProblem = (text: string) =>
  Value.Check(Telephone, text) ? null : 'is not a telephone number (e.g. +447700900123)';

/** The parts of an address a form sends, in the API's names. */
const ADDRESS_PARTS = ['line1', 'line2', 'city', 'state', 'postalCode', 'country'] as const;
type AddressForm = Partial<Record<(typeof ADDRESS_PARTS)[number], string>>;

/** Tax ids one customer may hold (the API's limit). */
const MAX_TAX_IDS = TaxIdsInput.maxItems ?? 5;

/** ajv-formats' `email`, the format the API's customer schemas check with. */
const EMAIL = fullFormats.email as RegExp;

/** An address the API's `email` format takes, lower-cased. */
function emailOf(value: string | undefined): string {
  const email = (value ?? '').trim().toLowerCase();
  if (email.length > (Email.maxLength ?? 254) || !EMAIL.test(email))
    throw invalid('email', 'is not an email address');
  return email;
}

/**
 * The signed-in customer's own details in the portal (docs/portal.md), as Stripe's customer
 * portal lets a customer keep them: name, telephone, billing address and tax ids saved at once; a new email address only
 * once a code mailed to it comes back, since the address is where billing mail goes and what the
 * portal signs in with. The old address is told of the change. Every change goes through the
 * customer service the API answers with (`customer.updated`, and on to Stripe).
 */
export class PortalDetails {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly mailer: Mailer,
    private readonly logger: Logger,
    private readonly portal: Pick<PortalService, 'proven' | 'signedIn' | 'merchant'>,
    private readonly customers: Pick<CustomerService, 'get' | 'update'>,
  ) {}

  /** Saves the name and telephone (empty clears one); undefined when not signed in. */
  async save(secret: string | undefined, form: Form & { name?: string; telephone?: string }) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const name = optional(form.name, 'name', nameProblem);
    const telephone = optional(form.telephone, 'telephone', telephoneProblem);
    await this.customers.update(tenantOf(session), session.customer_id, { name, telephone });
    return 'details' as const;
  }

  /**
   * Saves the billing address invoices are addressed to (every part empty clears it), each part
   * held to the API's rules; undefined when not signed in.
   */
  async saveAddress(secret: string | undefined, form: Form & AddressForm) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const address: AddressForm = {};
    for (const part of ADDRESS_PARTS) {
      const text = (form[part] ?? '').trim();
      if (text === '') continue;
      if (!Value.Check(AddressInput.properties[part], text))
        throw invalid(
          `address/${part}`,
          part === 'country' ? 'is not a country' : 'is too long or holds a line break',
        );
      address[part] = text;
    }
    await this.customers.update(tenantOf(session), session.customer_id, {
      address: Object.keys(address).length === 0 ? null : address,
    });
    return 'address' as const;
  }

  /** Adds a tax id (VAT, EIN, …) to those the customer's invoices name them by. */
  async addTaxId(secret: string | undefined, form: Form & { type?: string; value?: string }) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const type = form.type ?? '';
    if (!(TAX_ID_TYPES as string[]).includes(type)) throw invalid('taxIds/type', 'is not a kind of tax ID');
    const value = (form.value ?? '').trim();
    if (!Value.Check(TaxId.properties.value, value)) throw invalid('taxIds/value', 'is not a tax ID');
    // Made from the customer under their row's lock: two tabs adding at once both keep theirs.
    await this.customers.update(tenantOf(session), session.customer_id, (current) => {
      if (current.taxIds.length >= MAX_TAX_IDS)
        throw invalid('taxIds', `holds at most ${MAX_TAX_IDS} tax IDs: remove one first`);
      return { taxIds: [...current.taxIds, { type: type as TaxIdType, value }] };
    });
    return 'taxId' as const;
  }

  /** Takes one of the customer's tax ids off; one they no longer hold is already off. */
  async removeTaxId(secret: string | undefined, form: Form & { type?: string; value?: string }) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    await this.customers.update(tenantOf(session), session.customer_id, (current) => {
      const kept = current.taxIds.filter((taxId) => taxId.type !== form.type || taxId.value !== form.value);
      return kept.length === current.taxIds.length ? {} : { taxIds: kept };
    });
    return 'untaxed' as const;
  }

  /**
   * Mails a code to the new address the customer typed: the code's id, for the page that takes
   * it. Mail to one inbox is throttled with the sign-in's counters, and the addresses one
   * customer may try in a while are few, so the portal mails no stranger much.
   */
  async askEmail(secret: string | undefined, form: Form & { email?: string }, address: string) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const tenant = tenantOf(session);
    const email = emailOf(form.email);
    const current = await this.customers.get(tenant, session.customer_id);
    if (current.email?.toLowerCase() === email) throw invalid('email', 'is already your address');
    const at = this.clock.now();
    const addressKey = `address:${address}`;
    await reserveOrRefuse(
      this.pool,
      [
        { key: `mail:${tenant.providerId}:${tenant.environment}:${email}`, limit: MAX_CODES_PER_EMAIL },
        { key: `email-change:${session.customer_id}`, limit: MAX_ADDRESS_CHANGES },
        { key: addressKey, limit: MAX_ATTEMPTS_PER_ADDRESS },
      ],
      at,
    );
    // A code mailed counts against the inbox and the customer; the address is checked, not counted.
    await releaseAttempts(this.pool, [addressKey]);
    const id = newId(ID.portalCode);
    const code = newCode();
    await insertPortalCode(this.pool, {
      id,
      purpose: 'email_change',
      provider_id: tenant.providerId,
      environment: tenant.environment,
      email,
      customer_id: session.customer_id,
      code_hash: sha256(`${id}:${code}`),
      expires_at: new Date(at.getTime() + CODE_TTL_MS),
      created_at: at,
    });
    const merchant = (await this.portal.merchant(session)).displayName;
    await mailCode(this.mailer, {
      to: email,
      subject: `${code} is your code to confirm this address with ${merchant}`,
      intro: `To use this address for your ${merchant} account, enter this code where you asked for it:`,
      code,
      outro: ['It works once, for 10 minutes. If you did not ask for it, ignore this message.'],
    });
    return id;
  }

  /** The page that takes a code mailed to a new address: that address; 404 for another's code. */
  async emailPage(secret: string | undefined, codeId: string) {
    const session = await this.portal.signedIn(secret);
    if (session === undefined) return undefined;
    const row = await findPortalCode(
      this.pool,
      { ...tenantOf(session), purpose: 'email_change', customerId: session.customer_id },
      codeId,
    );
    if (row === undefined) return { unknown: true as const };
    return {
      merchant: await this.portal.merchant(session),
      codeId: row.id,
      email: row.email,
      csrf: session.csrf_token,
    };
  }

  /** With the right code, the new address is the customer's, and the old one is told. */
  async confirmEmail(
    secret: string | undefined,
    form: Form & { codeId?: string; code?: string },
    address: string,
  ) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const tenant = tenantOf(session);
    const addressKey = `address:${address}`;
    await reserveOrRefuse(
      this.pool,
      [{ key: addressKey, limit: MAX_ATTEMPTS_PER_ADDRESS }],
      this.clock.now(),
    );
    const row = await useMailedCode(
      this.pool,
      { ...tenant, purpose: 'email_change', customerId: session.customer_id },
      (form.codeId ?? '').slice(0, 100),
      (form.code ?? '').trim(),
      this.clock.now(),
    );
    await releaseAttempts(this.pool, [addressKey]);
    const before = (await this.customers.get(tenant, session.customer_id)).email;
    // The sign-in account follows the proven address (the notice below says they sign in with it).
    if (!(await moveLoginEmail(this.pool, session.customer_id, row.email, this.clock.now())))
      throw invalid('email', 'is the sign-in of another account: sign in with it there');
    await this.customers.update(tenant, session.customer_id, { email: row.email });
    if (before !== null && before.toLowerCase() !== row.email) {
      const { displayName: merchant, supportEmail } = await this.portal.merchant(session);
      await this.mailer
        .send({
          to: before,
          subject: `Your ${merchant} account's email address was changed`,
          text: [
            `The email address of your ${merchant} account is now ${row.email}: mail about your account goes there, and you sign in with it.`,
            '',
            `If you did not change it, contact ${merchant} at once${supportEmail === null ? '' : ` (${supportEmail})`}.`,
          ].join('\n'),
        })
        .catch((error: unknown) =>
          this.logger.warn({ err: error, customer: session.customer_id }, 'address change notice not sent'),
        );
    }
    return 'email' as const;
  }
}
