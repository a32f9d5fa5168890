import { ID, newId } from '@mcp-meter/contracts/kit';
import { AGGREGATIONS, type Aggregation } from '@mcp-meter/contracts/usage';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import { prepared, type Queryable } from '../../db/pool';

export const REQUESTS_METER = 'requests';
export { AGGREGATIONS };

export interface Meter {
  id: string;
  providerId: string;
  environment: Environment;
  name: string;
  description: string | null;
  aggregation: Aggregation;
  valueProperty: string | null;
  status: 'active' | 'archived';
  createdAt: Date;
  updatedAt: Date;
}

interface MeterRow {
  id: string;
  provider_id: string;
  environment: Environment;
  name: string;
  description: string | null;
  aggregation: Aggregation;
  value_property: string | null;
  status: Meter['status'];
  created_at: Date;
  updated_at: Date;
}

const toMeter = (row: MeterRow): Meter => ({
  id: row.id,
  providerId: row.provider_id,
  environment: row.environment,
  name: row.name,
  description: row.description,
  aggregation: row.aggregation,
  valueProperty: row.value_property,
  status: row.status,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

export async function insertMeter(
  db: Queryable,
  meter: {
    providerId: string;
    environment: Environment;
    name: string;
    aggregation: Aggregation;
    valueProperty?: string | null;
    description?: string | null;
    at: Date;
  },
): Promise<Meter> {
  const { rows } = await db.query<MeterRow>(
    `INSERT INTO meters (id, provider_id, environment, name, aggregation, value_property, description, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING *`,
    [
      newId(ID.meter),
      meter.providerId,
      meter.environment,
      meter.name,
      meter.aggregation,
      meter.valueProperty ?? null,
      meter.description ?? null,
      meter.at,
    ],
  );
  const row = rows[0];
  if (row === undefined) throw new Error('meter insert returned no row');
  return toMeter(row);
}

/** `ref` is a meter id (`mtr_…`) or a meter name; both work wherever a meter is named. */
export async function findMeter(
  db: Queryable,
  providerId: string,
  environment: Environment,
  ref: string,
): Promise<Meter | undefined> {
  const { rows } = await db.query<MeterRow>(
    prepared(
      'meter_by_ref',
      `SELECT * FROM meters WHERE provider_id = $1 AND environment = $2 AND (id = $3 OR name = $3)`,
      [providerId, environment, ref],
    ),
  );
  return rows[0] === undefined ? undefined : toMeter(rows[0]);
}

export async function listMeters(
  db: Queryable,
  tenant: { providerId: string; environment: Environment },
  options: { after?: string | undefined; limit: number; status?: string | undefined },
): Promise<Meter[]> {
  const { rows } = await db.query<MeterRow>(
    `SELECT * FROM meters
      WHERE provider_id = $1 AND environment = $2 AND ($3::text IS NULL OR id > $3) AND ($4::text IS NULL OR status = $4)
      ORDER BY id LIMIT $5`,
    [tenant.providerId, tenant.environment, options.after ?? null, options.status ?? null, options.limit + 1],
  );
  return rows.map(toMeter);
}

export async function archiveMeter(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query(`UPDATE meters SET status = 'archived', updated_at = $2 WHERE id = $1`, [id, at]);
}
