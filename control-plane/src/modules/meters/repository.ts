import type { Environment } from '@mcp-meter/ingest';
import { newId } from '@mcp-meter/ingest/kit';
import type { Queryable } from '../../db/pool';

export const REQUESTS_METER = 'requests';

export interface Meter {
  id: string;
  providerId: string;
  environment: Environment;
  name: string;
  aggregation: 'sum' | 'count' | 'max' | 'unique_count';
  status: 'active' | 'archived';
  createdAt: Date;
}

interface MeterRow {
  id: string;
  provider_id: string;
  environment: Environment;
  name: string;
  aggregation: Meter['aggregation'];
  status: Meter['status'];
  created_at: Date;
}

const toMeter = (row: MeterRow): Meter => ({
  id: row.id,
  providerId: row.provider_id,
  environment: row.environment,
  name: row.name,
  aggregation: row.aggregation,
  status: row.status,
  createdAt: row.created_at,
});

export async function insertMeter(
  db: Queryable,
  meter: {
    providerId: string;
    environment: Environment;
    name: string;
    aggregation: Meter['aggregation'];
    at: Date;
  },
): Promise<Meter> {
  const { rows } = await db.query<MeterRow>(
    `INSERT INTO meters (id, provider_id, environment, name, aggregation, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING *`,
    [newId('mtr'), meter.providerId, meter.environment, meter.name, meter.aggregation, meter.at],
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
    `SELECT * FROM meters WHERE provider_id = $1 AND environment = $2 AND (id = $3 OR name = $3)`,
    [providerId, environment, ref],
  );
  return rows[0] === undefined ? undefined : toMeter(rows[0]);
}
