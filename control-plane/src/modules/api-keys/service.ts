import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import { DomainError, NotFoundError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { generateKey } from '../providers/keys';
import type { ProviderService } from '../providers/service';
import { isMember } from '../team/service';
import {
  type ApiKeyRow,
  expireKey,
  findKey,
  insertNamedKey,
  listActiveKeys,
  lockActiveKey,
  revokeKey,
} from './repository';

/** A roll's old key works at most this long after (Stripe allows up to 7 days). */
export const MAX_ROLL_OVERLAP_SECONDS = 7 * 24 * 60 * 60;

const view = (row: ApiKeyRow) => ({
  id: row.id,
  name: row.name,
  hint: row.key_hint,
  createdBy: row.created_by_email,
  createdAt: row.created_at.toISOString(),
  expiresAt: row.expires_at?.toISOString() ?? null,
});

/**
 * The provider's secret keys, managed by console members: create one (its secret answered once),
 * roll one (a new secret now; the old one keeps working for the overlap asked, then stops), and
 * revoke one (it stops at once). A key cannot manage keys: a leaked key could otherwise mint
 * another before it is revoked. Every change forgets the keys this control plane remembers, so
 * the next call is checked again.
 */
export class ApiKeyService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly providers: ProviderService,
  ) {}

  private member(auth: AuthContext): { userId: string } {
    if (!isMember(auth))
      throw new DomainError(
        'forbidden',
        'API keys are managed in the console (or with the admin CLI), not with a key',
      );
    return { userId: auth.userId };
  }

  async list(auth: AuthContext) {
    const rows = await listActiveKeys(this.pool, auth, this.clock.now());
    return { data: rows.map(view) };
  }

  async create(auth: AuthContext, input: { name?: string | undefined }) {
    const { userId } = this.member(auth);
    const secret = generateKey(auth.environment);
    const id = await insertNamedKey(this.pool, {
      tenant: auth,
      secret,
      name: input.name?.trim() || null,
      createdBy: userId,
      at: this.clock.now(),
    });
    const row = await findKey(this.pool, id);
    if (row === undefined) throw new Error('the new key vanished');
    return { ...view(row), secret };
  }

  /**
   * A new secret in place of the key's: the old one stops after `overlapSeconds` (0: at once).
   * The key is locked while rolled, so rolling it twice at once makes one new key.
   */
  async roll(auth: AuthContext, id: string, overlapSeconds: number) {
    const { userId } = this.member(auth);
    const now = this.clock.now();
    const secret = generateKey(auth.environment);
    const newId = await inTransaction(this.pool, async (tx) => {
      const old = await lockActiveKey(tx, auth, id, now);
      if (old === undefined) throw new NotFoundError('api_key_not_found', `No active API key ${id}`);
      if (old.expires_at !== null)
        throw new DomainError('key_rolled', 'This key was rolled already: roll its successor instead');
      await expireKey(tx, id, new Date(now.getTime() + overlapSeconds * 1000));
      return insertNamedKey(tx, { tenant: auth, secret, name: old.name, createdBy: userId, at: now });
    });
    this.providers.forgetKeys();
    const row = await findKey(this.pool, newId);
    const old = await findKey(this.pool, id);
    if (row === undefined || old === undefined) throw new Error('a rolled key vanished');
    return { ...view(row), secret, rolled: view(old) };
  }

  async revoke(auth: AuthContext, id: string) {
    this.member(auth);
    const now = this.clock.now();
    await inTransaction(this.pool, async (tx) => {
      if ((await lockActiveKey(tx, auth, id, now)) === undefined)
        throw new NotFoundError('api_key_not_found', `No active API key ${id}`);
      await revokeKey(tx, id, now);
    });
    this.providers.forgetKeys();
    return { id, revoked: true as const };
  }
}
