import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

export interface EndpointRow {
  id: string;
  provider_id: string;
  environment: Environment;
  url: string;
  description: string | null;
  enabled_events: string[];
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  consecutive_failures: number;
  created_at: Date;
  updated_at: Date;
}

export interface AttemptRow {
  id: string;
  delivery_id: string | null;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  succeeded: boolean;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  response_excerpt: string | null;
  next_attempt_at: Date | null;
  created_at: Date;
}

type Tenant = { providerId: string; environment: Environment };

export async function insertEndpoint(
  db: Queryable,
  e: { id: string; tenant: Tenant; url: string; description: string | null; events: string[]; at: Date },
): Promise<EndpointRow> {
  const { rows } = await db.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (id, provider_id, environment, url, description, enabled_events, status, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'enabled', $7, $7) RETURNING *`,
    [e.id, e.tenant.providerId, e.tenant.environment, e.url, e.description, e.events, e.at],
  );
  return rows[0] as EndpointRow;
}

export async function insertSecret(db: Queryable, id: string, endpointId: string, sealed: string, at: Date) {
  await db.query(
    'INSERT INTO webhook_secrets (id, endpoint_id, sealed_secret, created_at) VALUES ($1, $2, $3, $4)',
    [id, endpointId, sealed, at],
  );
}

/** The endpoint's current secrets stop signing at `until` (the overlap of a rotation). */
export async function expireSecrets(db: Queryable, endpointId: string, until: Date) {
  await db.query(
    'UPDATE webhook_secrets SET expires_at = LEAST(COALESCE(expires_at, $2), $2) WHERE endpoint_id = $1',
    [endpointId, until],
  );
}

/** The sealed secrets that still sign, newest first. */
export async function liveSecrets(db: Queryable, endpointId: string, now: Date): Promise<string[]> {
  const { rows } = await db.query<{ sealed_secret: string }>(
    `SELECT sealed_secret FROM webhook_secrets WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > $2)
      ORDER BY created_at DESC`,
    [endpointId, now],
  );
  return rows.map((r) => r.sealed_secret);
}

export async function findEndpoint(
  db: Queryable,
  tenant: Tenant,
  id: string,
  forUpdate: boolean,
): Promise<EndpointRow | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT * FROM webhook_endpoints WHERE id = $1 AND provider_id = $2 AND environment = $3 AND deleted_at IS NULL
     ${forUpdate ? 'FOR UPDATE' : ''}`,
    [id, tenant.providerId, tenant.environment],
  );
  return rows[0];
}

export async function listEndpoints(db: Queryable, tenant: Tenant): Promise<EndpointRow[]> {
  const { rows } = await db.query<EndpointRow>(
    'SELECT * FROM webhook_endpoints WHERE provider_id = $1 AND environment = $2 AND deleted_at IS NULL ORDER BY id',
    [tenant.providerId, tenant.environment],
  );
  return rows;
}

export async function updateEndpoint(
  db: Queryable,
  id: string,
  e: { url: string; events: string[]; description: string | null; at: Date },
): Promise<EndpointRow> {
  const { rows } = await db.query<EndpointRow>(
    'UPDATE webhook_endpoints SET url = $2, enabled_events = $3, description = $4, updated_at = $5 WHERE id = $1 RETURNING *',
    [id, e.url, e.events, e.description, e.at],
  );
  return rows[0] as EndpointRow;
}

/** Deletes the endpoint (soft) with its pending deliveries. */
export async function deleteEndpoint(db: Queryable, id: string, at: Date) {
  await db.query('UPDATE webhook_endpoints SET deleted_at = $2, updated_at = $2 WHERE id = $1', [id, at]);
  await db.query(`DELETE FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending'`, [id]);
}

/** Enables (its failure count starting over) or disables an endpoint. */
export async function setEndpointStatus(
  db: Queryable,
  id: string,
  e: { status: 'enabled' | 'disabled'; reason: string | null; at: Date },
): Promise<EndpointRow> {
  const { rows } = await db.query<EndpointRow>(
    `UPDATE webhook_endpoints
        SET status = $2, disabled_reason = $3, consecutive_failures = CASE WHEN $2 = 'enabled' THEN 0 ELSE consecutive_failures END,
            updated_at = $4
      WHERE id = $1 RETURNING *`,
    [id, e.status, e.reason, e.at],
  );
  return rows[0] as EndpointRow;
}

export async function insertAttempt(db: Queryable, a: AttemptRow): Promise<AttemptRow> {
  const { rows } = await db.query<AttemptRow>(
    `INSERT INTO webhook_attempts (id, delivery_id, endpoint_id, event_id, event_type, attempt, succeeded, status_code,
                                   latency_ms, error, response_excerpt, next_attempt_at, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING *`,
    [
      a.id,
      a.delivery_id,
      a.endpoint_id,
      a.event_id,
      a.event_type,
      a.attempt,
      a.succeeded,
      a.status_code,
      a.latency_ms,
      a.error,
      a.response_excerpt,
      a.next_attempt_at,
      a.created_at,
    ],
  );
  return rows[0] as AttemptRow;
}

/** The attempt log, newest first. */
export async function listAttempts(
  db: Queryable,
  tenant: Tenant,
  q: { endpointId: string | null; eventId: string | null; limit: number },
): Promise<AttemptRow[]> {
  const { rows } = await db.query<AttemptRow>(
    `SELECT a.* FROM webhook_attempts a JOIN webhook_endpoints e ON e.id = a.endpoint_id
      WHERE e.provider_id = $1 AND e.environment = $2
        AND ($3::text IS NULL OR a.endpoint_id = $3) AND ($4::text IS NULL OR a.event_id = $4)
      ORDER BY a.created_at DESC, a.id DESC LIMIT $5`,
    [tenant.providerId, tenant.environment, q.endpointId, q.eventId, q.limit],
  );
  return rows;
}

/**
 * Queues one event, or the events of a time range, that the endpoint subscribes to: an existing
 * delivery is made due now, a missing one is created. Answers the deliveries queued.
 */
export async function queueRedeliveries(
  db: Queryable,
  tenant: Tenant,
  q: { endpointId: string; at: Date; eventId: string | null; from: Date | null; to: Date; events: string[] },
): Promise<Array<{ id: string }>> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, status, attempts, next_attempt_at, created_at, updated_at)
     SELECT 'whd_' || substr(md5(o.id || $1), 1, 26), o.id, $1, 'pending', 0, $2, $2, $2
       FROM outbox_events o
      WHERE o.provider_id = $3 AND o.environment = $4
        AND ($5::text IS NULL OR o.id = $5)
        AND ($6::timestamptz IS NULL OR (o.created_at >= $6 AND o.created_at < $7))
        AND (cardinality($8::text[]) = 0 OR o.type = ANY($8))
     ON CONFLICT (id) DO UPDATE SET status = 'pending', next_attempt_at = $2, locked_until = NULL, updated_at = $2
     RETURNING id`,
    [q.endpointId, q.at, tenant.providerId, tenant.environment, q.eventId, q.from, q.to, q.events],
  );
  return rows;
}

/** A delivery claimed for an attempt, with what the attempt sends. */
export interface ClaimedDelivery {
  id: string;
  event_id: string;
  endpoint_id: string;
  attempts: number;
  url: string;
  type: string;
  body: string;
}

/** Whether any delivery is due now on an enabled endpoint and not leased to a worker. */
export async function anyDeliveryDue(db: Queryable, now: Date): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
      WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.locked_until IS NULL OR d.locked_until <= $1)
        AND e.status = 'enabled' AND e.deleted_at IS NULL LIMIT 1`,
    [now],
  );
  return rows.length > 0;
}

/** The most due deliveries `deliveriesDue` counts: a scrape reads at most this many rows. */
export const DUE_COUNT_CAP = 10_000;

/**
 * The deliveries due now to enabled endpoints (at most DUE_COUNT_CAP), and how long the oldest of
 * them has been due (0 when none): what the workers of every control plane have yet to send.
 * They are read oldest first along the due index, so the count stops at the cap however long the
 * backlog, as the metrics page may be asked for often.
 */
export async function deliveriesDue(
  db: Queryable,
  now: Date,
): Promise<{ due: number; oldestDueSeconds: number }> {
  const { rows } = await db.query<{ due: string; oldest: Date | null }>(
    `SELECT count(*) AS due, min(next_attempt_at) AS oldest FROM (
       SELECT d.next_attempt_at FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND e.status = 'enabled' AND e.deleted_at IS NULL
        ORDER BY d.next_attempt_at LIMIT $2) due`,
    [now, DUE_COUNT_CAP],
  );
  const oldest = rows[0]?.oldest;
  return {
    due: Number(rows[0]?.due ?? 0),
    oldestDueSeconds: oldest == null ? 0 : Math.max(0, (now.getTime() - oldest.getTime()) / 1000),
  };
}

/**
 * Claims up to `capacity` due deliveries for this worker: leases them until `lockedUntil` and
 * counts the attempt. Candidates are locked first (SKIP LOCKED: never what another worker is
 * claiming), then at most `perEndpoint` are kept per endpoint, so one endpoint's backlog cannot
 * fill the batch; endpoints already at their share here (`busyEndpoints`) and deliveries in
 * flight here are left out.
 */
export async function claimDueDeliveries(
  db: Queryable,
  claim: {
    now: Date;
    capacity: number;
    lockedUntil: Date;
    busyEndpoints: string[];
    inFlight: string[];
    perEndpoint: number;
  },
): Promise<ClaimedDelivery[]> {
  const { rows } = await db.query<ClaimedDelivery>(
    `WITH candidates AS (
       SELECT d.id, d.endpoint_id, d.next_attempt_at
         FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.locked_until IS NULL OR d.locked_until <= $1)
          AND e.status = 'enabled' AND e.deleted_at IS NULL AND NOT (d.endpoint_id = ANY($4)) AND NOT (d.id = ANY($5))
        ORDER BY d.next_attempt_at, d.id
        LIMIT $7
        FOR UPDATE OF d SKIP LOCKED
     ),
     ranked AS (
       SELECT id, next_attempt_at, row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at, id) AS rn
         FROM candidates
     ),
     picked AS (SELECT id FROM ranked WHERE rn <= $6 ORDER BY next_attempt_at, id LIMIT $2)
     UPDATE webhook_deliveries d SET locked_until = $3, attempts = d.attempts + 1, updated_at = $1
       FROM picked, webhook_endpoints e, outbox_events o
      WHERE d.id = picked.id AND e.id = d.endpoint_id AND o.id = d.event_id
     RETURNING d.id, d.event_id, d.endpoint_id, d.attempts, e.url, o.type, o.payload::text AS body`,
    [
      claim.now,
      claim.capacity,
      claim.lockedUntil,
      claim.busyEndpoints,
      claim.inFlight,
      claim.perEndpoint,
      claim.capacity * 4,
    ],
  );
  return rows;
}

/**
 * Writes an attempt's outcome in one statement, so in one round trip and atomically: the
 * delivery's state (succeeded, or pending until `next`), the attempt log, and the endpoint's
 * consecutive-failure count, which disables it at `disableAfter`. Answers the endpoint's count
 * and status when they changed.
 */
export async function recordAttempt(
  db: Queryable,
  outcome: {
    delivery: ClaimedDelivery;
    attemptId: string;
    result: {
      ok: boolean;
      statusCode: number | null;
      error: string | null;
      latencyMs: number;
      responseExcerpt: string | null;
    };
    next: Date | null;
    at: Date;
    disableAfter: number;
  },
): Promise<{ consecutive_failures: number; status: string } | undefined> {
  const { delivery: d, result } = outcome;
  const { rows } = await db.query<{ consecutive_failures: number; status: string }>(
    `WITH delivery AS (
       UPDATE webhook_deliveries
          SET status = $2, next_attempt_at = COALESCE($3, next_attempt_at), locked_until = NULL,
              last_status_code = $4, last_error = $5, updated_at = $6
        WHERE id = $1
     ),
     logged AS (
       INSERT INTO webhook_attempts (id, delivery_id, endpoint_id, event_id, event_type, attempt, succeeded, status_code,
                                     latency_ms, error, response_excerpt, next_attempt_at, created_at)
       VALUES ($7, $1, $8, $9, $10, $11, $12, $4, $13, $5, $14, $3, $6)
     )
     UPDATE webhook_endpoints
        SET consecutive_failures = CASE WHEN $12 THEN 0 ELSE consecutive_failures + 1 END,
            status = CASE WHEN NOT $12 AND consecutive_failures + 1 >= $15 THEN 'disabled' ELSE status END,
            disabled_reason = CASE WHEN NOT $12 AND consecutive_failures + 1 >= $15 AND status = 'enabled'
                                   THEN $16 ELSE disabled_reason END,
            updated_at = CASE WHEN $12 THEN updated_at ELSE $6 END
      WHERE id = $8 AND (NOT $12 OR consecutive_failures <> 0)
      RETURNING consecutive_failures, status`,
    [
      d.id,
      result.ok ? 'succeeded' : 'pending',
      outcome.next,
      result.statusCode,
      result.error,
      outcome.at,
      outcome.attemptId,
      d.endpoint_id,
      d.event_id,
      d.type,
      d.attempts,
      result.ok,
      result.latencyMs,
      result.responseExcerpt,
      outcome.disableAfter,
      `${outcome.disableAfter} consecutive failed attempts`,
    ],
  );
  return rows[0];
}
