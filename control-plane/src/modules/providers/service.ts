import { ENVIRONMENTS, type Environment } from '@mcp-meter/ingest';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import { NotFoundError, UnauthorizedError } from '../../errors';
import { insertMeter, REQUESTS_METER } from '../meters/repository';
import { environmentOfKey, generateKey } from './keys';
import {
  findKeyOwner,
  getProvider,
  insertApiKey,
  insertProvider,
  listProviders,
  type Provider,
  revokeApiKeys,
  setLiveEnabled,
} from './repository';

export interface AuthContext {
  providerId: string;
  environment: Environment;
}

export interface CreatedProvider {
  provider: Provider;
  sandboxKey: string;
  liveKey: string;
}

export class ProviderService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  /** A provider, one key per environment and the auto-assigned `requests` meter in each, atomically. */
  async create(input: {
    displayName: string;
    legalName?: string;
    liveEnabled?: boolean;
  }): Promise<CreatedProvider> {
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
      return { provider, sandboxKey: keys.sandbox, liveKey: keys.live };
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
    if (!(await setLiveEnabled(this.pool, id, enabled, this.clock.now()))) {
      throw new NotFoundError('not_found', `No provider ${id}`);
    }
  }

  /** Revokes every active key of the environment and issues a new one in the same transaction. */
  async rotateKey(providerId: string, environment: Environment): Promise<{ key: string; revoked: number }> {
    await this.get(providerId);
    const at = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const revoked = await revokeApiKeys(tx, providerId, environment, at);
      const key = generateKey(environment);
      await insertApiKey(tx, { providerId, environment, key, at });
      return { key, revoked };
    });
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
    const owner = claimed === undefined || key.length > 200 ? undefined : await findKeyOwner(this.pool, key);
    if (owner === undefined || owner.environment !== claimed) {
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
