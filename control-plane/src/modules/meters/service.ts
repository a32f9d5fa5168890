import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { archiveMeter, findMeter, insertMeter, listMeters, type Meter, REQUESTS_METER } from './repository';
import type { MeterCreate, Meter as MeterSchema } from './schemas';

export const toApiMeter = (m: Meter): Static<typeof MeterSchema> => ({
  id: m.id,
  reference: m.id,
  name: m.name,
  description: m.description,
  aggregation: m.aggregation,
  valueProperty: m.valueProperty,
  status: m.status,
  createdAt: m.createdAt.toISOString(),
  updatedAt: m.updatedAt.toISOString(),
});

export class MeterService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  async create(auth: AuthContext, input: Static<typeof MeterCreate>) {
    if (input.aggregation === 'unique_count' && input.valueProperty === undefined) {
      throw new ValidationError([
        { path: '/valueProperty', message: 'is required for unique_count meters', location: 'body' },
      ]);
    }
    if (input.aggregation !== 'unique_count' && input.valueProperty !== undefined) {
      throw new ValidationError([
        { path: '/valueProperty', message: 'is only used by unique_count meters', location: 'body' },
      ]);
    }
    try {
      return toApiMeter(await insertMeter(this.pool, { ...auth, ...input, at: this.clock.now() }));
    } catch (error) {
      if ((error as { code?: string }).code === '23505') {
        throw new ConflictError('meter_name_taken', `A meter named "${input.name}" already exists`);
      }
      throw error;
    }
  }

  async resolve(auth: AuthContext, ref: string): Promise<Meter> {
    const meter = await findMeter(this.pool, auth.providerId, auth.environment, ref);
    if (meter === undefined) throw new NotFoundError('meter_not_found', `No meter ${ref}`);
    return meter;
  }

  async get(auth: AuthContext, ref: string) {
    return toApiMeter(await this.resolve(auth, ref));
  }

  async list(
    auth: AuthContext,
    query: { limit: number; cursor?: string | undefined; status?: string | undefined },
  ) {
    const rows = await listMeters(this.pool, auth, {
      after: decodeCursor(query.cursor),
      limit: query.limit,
      status: query.status,
    });
    return toPage(rows, query.limit, toApiMeter);
  }

  /** Archived meters keep their history and stay queryable; they accept no new records. */
  async archive(auth: AuthContext, ref: string) {
    const meter = await this.resolve(auth, ref);
    if (meter.name === REQUESTS_METER) {
      throw new ConflictError(
        'meter_protected',
        'The requests meter counts proxy tool calls and cannot be archived',
      );
    }
    if (meter.status !== 'archived') await archiveMeter(this.pool, meter.id, this.clock.now());
    return this.get(auth, meter.id);
  }
}
