import { ENVIRONMENTS, type Environment } from '@mcp-meter/contracts/usage-record';
import { type AddressInput, isCountry, normalizeAddress } from '../../billing-details';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type Queryable } from '../../db/pool';
import {
  type FieldProblem,
  isDependencyOutage,
  NotFoundError,
  UnauthorizedError,
  UnavailableError,
  ValidationError,
} from '../../errors';
import type { AuthContext } from '../../tenancy';
import { insertMeter, REQUESTS_METER } from '../meters/repository';
import { isCurrency } from '../plans/rules';
import { environmentOfKey, generateKey } from './keys';
import {
  findKeyOwner,
  getProvider,
  insertApiKey,
  insertProvider,
  type KeyOwner,
  listProviders,
  type MerchantFields,
  type Provider,
  revokeApiKeys,
  setLiveEnabled,
  updateMerchant,
} from './repository';

export type { AuthContext };

export interface CreatedProvider {
  provider: Provider;
  sandboxKey: string;
  liveKey: string;
}

/** A verified key is looked up again after this long (a revocation elsewhere takes this long to apply). */
const KEY_FRESH_MS = 5_000;
/** While PostgreSQL is unreachable, a key verified this recently is still accepted. */
const KEY_OUTAGE_GRACE_MS = 10 * 60_000;
const KEY_CACHE_LIMIT = 10_000;

export class ProviderService {
  /** Verified keys by their secret: a key check is a map lookup, and survives a database outage. */
  private readonly verifiedKeys = new Map<string, { owner: KeyOwner; checkedAt: number }>();

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  /**
   * A provider, one key per environment and the auto-assigned `requests` meter in each, atomically;
   * with `within`, what else must exist with it (its first owner) is written in the same transaction.
   */
  async create(
    input: {
      displayName: string;
      legalName?: string;
      liveEnabled?: boolean;
    },
    within?: (tx: Queryable, created: CreatedProvider) => Promise<void>,
  ): Promise<CreatedProvider> {
    const at = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const provider = await insertProvider(tx, {
        displayName: input.displayName,
        legalName: input.legalName ?? input.displayName,
        liveEnabled: input.liveEnabled ?? true,
        at,
      });
      const keys: Record<Environment, string> = {
        sandbox: generateKey('sandbox'),
        live: generateKey('live'),
      };
      for (const environment of ENVIRONMENTS) {
        await insertApiKey(tx, { providerId: provider.id, environment, key: keys[environment], at });
        await insertMeter(tx, {
          providerId: provider.id,
          environment,
          name: REQUESTS_METER,
          aggregation: 'sum',
          at,
        });
      }
      const created = { provider, sandboxKey: keys.sandbox, liveKey: keys.live };
      await within?.(tx, created);
      return created;
    });
  }

  list(): Promise<Provider[]> {
    return listProviders(this.pool);
  }

  async get(id: string): Promise<Provider> {
    const provider = await getProvider(this.pool, id);
    if (provider === undefined) throw new NotFoundError('not_found', `No provider ${id}`);
    return provider;
  }

  async setLiveEnabled(id: string, enabled: boolean): Promise<void> {
    const changed = await setLiveEnabled(this.pool, id, enabled, this.clock.now());
    this.verifiedKeys.clear();
    if (!changed) {
      throw new NotFoundError('not_found', `No provider ${id}`);
    }
  }

  /** Validates and applies a merchant-profile change (spec 2.1 fields); null clears a field. */
  async updateMerchant(id: string, patch: Partial<Record<keyof MerchantFields, unknown>>): Promise<Provider> {
    const current = await this.get(id);
    const problems: FieldProblem[] = [];
    const fields = { ...patch } as Partial<MerchantFields>;
    if (typeof fields.country === 'string') {
      fields.country = fields.country.toUpperCase();
      if (!isCountry(fields.country))
        problems.push({ path: '/country', message: 'is not an ISO 3166-1 alpha-2 code', location: 'body' });
    }
    if (fields.address !== undefined && fields.address !== null) {
      const found: Array<{ path: string; message: string }> = [];
      fields.address = normalizeAddress(fields.address as AddressInput, '/address', found);
      for (const problem of found) problems.push({ ...problem, location: 'body' });
    }
    if (typeof fields.brandColor === 'string') fields.brandColor = fields.brandColor.toLowerCase();
    if (typeof fields.defaultCurrency === 'string') {
      fields.defaultCurrency = fields.defaultCurrency.toLowerCase();
      if (!isCurrency(fields.defaultCurrency))
        problems.push({ path: '/defaultCurrency', message: 'is not an ISO 4217 code', location: 'body' });
    }
    if (Array.isArray(fields.supportedTopupCurrencies)) {
      fields.supportedTopupCurrencies = fields.supportedTopupCurrencies.map((c) => c.toLowerCase());
      fields.supportedTopupCurrencies.forEach((c, i) => {
        if (!isCurrency(c))
          problems.push({
            path: `/supportedTopupCurrencies/${i}`,
            message: 'is not an ISO 4217 code',
            location: 'body',
          });
      });
    }
    const currency = fields.defaultCurrency === undefined ? current.defaultCurrency : fields.defaultCurrency;
    const topups =
      fields.supportedTopupCurrencies === undefined
        ? current.supportedTopupCurrencies
        : fields.supportedTopupCurrencies;
    if (currency !== null && topups !== null && topups.length > 0 && !topups.includes(currency)) {
      problems.push({
        path: '/supportedTopupCurrencies',
        message: `must include the default currency (${currency})`,
        location: 'body',
      });
    }
    if (problems.length > 0) throw new ValidationError(problems);
    await updateMerchant(this.pool, id, fields, this.clock.now());
    return this.get(id);
  }

  /**
   * The owner of a key: remembered for KEY_FRESH_MS after a lookup; while PostgreSQL cannot be
   * reached, a key verified within KEY_OUTAGE_GRACE_MS is still accepted, so calls that need no
   * database (usage queries) keep working, and any other key gets 503 dependency_unavailable.
   * Refused keys are never remembered. Rotation and live-mode changes here forget every key.
   */
  private async keyOwner(key: string): Promise<KeyOwner | undefined> {
    const known = this.verifiedKeys.get(key);
    const now = performance.now();
    if (known !== undefined && now - known.checkedAt < KEY_FRESH_MS) return known.owner;
    let owner: KeyOwner | undefined;
    try {
      owner = await findKeyOwner(this.pool, key);
    } catch (error) {
      if (!isDependencyOutage(error)) throw error;
      if (known !== undefined && now - known.checkedAt < KEY_OUTAGE_GRACE_MS) return known.owner;
      throw new UnavailableError(
        'dependency_unavailable',
        'The API key cannot be checked right now (the database is unreachable); retry shortly',
      );
    }
    // Only keys that open the API are remembered: a refusal is looked up again next time.
    if (owner === undefined || (owner.environment === 'live' && !owner.liveEnabled))
      this.verifiedKeys.delete(key);
    else {
      if (this.verifiedKeys.size >= KEY_CACHE_LIMIT) this.verifiedKeys.clear();
      this.verifiedKeys.set(key, { owner, checkedAt: performance.now() });
    }
    return owner;
  }

  /** Forgets every key verified: after a key is revoked or rolled, the next call looks it up again. */
  forgetKeys(): void {
    this.verifiedKeys.clear();
  }

  /** Revokes every active key of the environment and issues a new one in the same transaction. */
  async rotateKey(providerId: string, environment: Environment): Promise<{ key: string; revoked: number }> {
    await this.get(providerId);
    const at = this.clock.now();
    const rotated = await inTransaction(this.pool, async (tx) => {
      const revoked = await revokeApiKeys(tx, providerId, environment, at);
      const key = generateKey(environment);
      await insertApiKey(tx, { providerId, environment, key, at });
      return { key, revoked };
    });
    this.verifiedKeys.clear();
    return rotated;
  }

  /** Resolves a bearer secret key; the environment comes from the key, never from the request. */
  async authenticate(authorization: string | undefined): Promise<AuthContext> {
    if (authorization === undefined || authorization.trim() === '') {
      throw new UnauthorizedError('unauthorized', 'Send your secret key as "Authorization: Bearer sk_…"');
    }
    const match = /^Bearer\s+(\S+)$/i.exec(authorization.trim());
    const key = match?.[1];
    if (key === undefined) {
      throw new UnauthorizedError('unauthorized', 'The Authorization header must use the Bearer scheme');
    }
    const claimed = environmentOfKey(key);
    const owner = claimed === undefined || key.length > 200 ? undefined : await this.keyOwner(key);
    // A rolled key's end is checked at every call, cached or not.
    const expired = owner?.expiresAt != null && owner.expiresAt <= this.clock.now();
    if (owner === undefined || owner.environment !== claimed || expired) {
      throw new UnauthorizedError('invalid_api_key', 'The API key is not valid or has been revoked');
    }
    if (owner.environment === 'live' && !owner.liveEnabled) {
      throw new NotFoundError(
        'provider_not_found_in_environment',
        'This provider has not been activated in live mode; use its sandbox key or activate live mode',
        { requestedEnvironment: 'live', providerExistsInSandbox: true },
      );
    }
    return { providerId: owner.providerId, environment: owner.environment };
  }
}
