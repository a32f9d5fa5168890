import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Address } from '../../billing-details';
import { prepared, type Queryable } from '../../db/pool';
import { hashKey, keyHint } from './keys';

export interface Provider {
  id: string;
  displayName: string;
  legalName: string;
  liveEnabled: boolean;
  companyNumber: string | null;
  country: string | null;
  defaultCurrency: string | null;
  iconUrl: string | null;
  logoUrl: string | null;
  brandColor: string | null;
  privacyUrl: string | null;
  termsUrl: string | null;
  statementDescriptor: string | null;
  supportedTopupCurrencies: string[] | null;
  supportEmail: string | null;
  supportUrl: string | null;
  taxId: string | null;
  vatNumber: string | null;
  /** The postal address invoices give under the legal name. */
  address: Address | null;
  createdAt: Date;
}

interface ProviderRow {
  id: string;
  display_name: string;
  legal_name: string;
  live_enabled: boolean;
  company_number: string | null;
  country: string | null;
  default_currency: string | null;
  icon_url: string | null;
  logo_url: string | null;
  brand_color: string | null;
  privacy_url: string | null;
  terms_url: string | null;
  statement_descriptor: string | null;
  supported_topup_currencies: string[] | null;
  support_email: string | null;
  support_url: string | null;
  tax_id: string | null;
  vat_number: string | null;
  address: Address | null;
  created_at: Date;
}

const toProvider = (r: ProviderRow): Provider => ({
  id: r.id,
  displayName: r.display_name,
  legalName: r.legal_name,
  liveEnabled: r.live_enabled,
  companyNumber: r.company_number,
  country: r.country,
  defaultCurrency: r.default_currency,
  iconUrl: r.icon_url,
  logoUrl: r.logo_url,
  brandColor: r.brand_color,
  privacyUrl: r.privacy_url,
  termsUrl: r.terms_url,
  statementDescriptor: r.statement_descriptor,
  supportedTopupCurrencies: r.supported_topup_currencies,
  supportEmail: r.support_email,
  supportUrl: r.support_url,
  taxId: r.tax_id,
  vatNumber: r.vat_number,
  address: r.address,
  createdAt: r.created_at,
});

export async function insertProvider(
  db: Queryable,
  p: { displayName: string; legalName: string; liveEnabled: boolean; at: Date },
): Promise<Provider> {
  const { rows } = await db.query<ProviderRow>(
    `INSERT INTO providers (id, display_name, legal_name, live_enabled, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $5) RETURNING *`,
    [newId(ID.provider), p.displayName, p.legalName, p.liveEnabled, p.at],
  );
  const row = rows[0];
  if (row === undefined) throw new Error('provider insert returned no row');
  return toProvider(row);
}

export async function getProvider(db: Queryable, id: string): Promise<Provider | undefined> {
  const { rows } = await db.query<ProviderRow>('SELECT * FROM providers WHERE id = $1', [id]);
  return rows[0] === undefined ? undefined : toProvider(rows[0]);
}

export async function listProviders(db: Queryable): Promise<Provider[]> {
  const { rows } = await db.query<ProviderRow>('SELECT * FROM providers ORDER BY id');
  return rows.map(toProvider);
}

export async function setLiveEnabled(
  db: Queryable,
  id: string,
  enabled: boolean,
  at: Date,
): Promise<boolean> {
  const result = await db.query('UPDATE providers SET live_enabled = $2, updated_at = $3 WHERE id = $1', [
    id,
    enabled,
    at,
  ]);
  return result.rowCount === 1;
}

export async function insertApiKey(
  db: Queryable,
  k: { providerId: string; environment: Environment; key: string; at: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO api_keys (id, provider_id, environment, key_hash, key_hint, created_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [newId(ID.apiKey), k.providerId, k.environment, hashKey(k.key), keyHint(k.key), k.at],
  );
}

export async function revokeApiKeys(
  db: Queryable,
  providerId: string,
  environment: Environment,
  at: Date,
): Promise<number> {
  const result = await db.query(
    'UPDATE api_keys SET revoked_at = $3 WHERE provider_id = $1 AND environment = $2 AND revoked_at IS NULL',
    [providerId, environment, at],
  );
  return result.rowCount ?? 0;
}

export interface KeyOwner {
  providerId: string;
  environment: Environment;
  liveEnabled: boolean;
  /** When a rolled key stops working; null for a key without an end. */
  expiresAt: Date | null;
}

export async function findKeyOwner(db: Queryable, key: string): Promise<KeyOwner | undefined> {
  const { rows } = await db.query<{
    provider_id: string;
    environment: Environment;
    live_enabled: boolean;
    expires_at: Date | null;
  }>(
    prepared(
      'key_owner',
      `SELECT k.provider_id, k.environment, p.live_enabled, k.expires_at
       FROM api_keys k JOIN providers p ON p.id = k.provider_id
      WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
      [hashKey(key)],
    ),
  );
  const row = rows[0];
  return row === undefined
    ? undefined
    : {
        providerId: row.provider_id,
        environment: row.environment,
        liveEnabled: row.live_enabled,
        expiresAt: row.expires_at,
      };
}

export type MerchantFields = Omit<Provider, 'id' | 'liveEnabled' | 'createdAt'>;

const MERCHANT_COLUMNS: Record<keyof MerchantFields, string> = {
  displayName: 'display_name',
  legalName: 'legal_name',
  companyNumber: 'company_number',
  country: 'country',
  defaultCurrency: 'default_currency',
  iconUrl: 'icon_url',
  logoUrl: 'logo_url',
  brandColor: 'brand_color',
  privacyUrl: 'privacy_url',
  termsUrl: 'terms_url',
  statementDescriptor: 'statement_descriptor',
  supportedTopupCurrencies: 'supported_topup_currencies',
  supportEmail: 'support_email',
  supportUrl: 'support_url',
  taxId: 'tax_id',
  vatNumber: 'vat_number',
  address: 'address',
};

/** Column names come from the fixed map above, never from the request. */
export async function updateMerchant(
  db: Queryable,
  id: string,
  fields: Partial<MerchantFields>,
  at: Date,
): Promise<void> {
  const entries = Object.entries(fields).filter(([, v]) => v !== undefined) as [
    keyof MerchantFields,
    unknown,
  ][];
  const sets = entries.map(([key], i) => `${MERCHANT_COLUMNS[key]} = $${i + 3}`);
  await db.query(`UPDATE providers SET ${[...sets, 'updated_at = $2'].join(', ')} WHERE id = $1`, [
    id,
    at,
    ...entries.map(([, v]) => v),
  ]);
}
