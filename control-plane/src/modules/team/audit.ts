import { ID, type Logger, newId } from '@mcp-meter/contracts/kit';
import type { FastifyRequest } from 'fastify';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import type { App } from '../../http/app';
import { OPERATION_IDS } from '../../http/operation-ids';
import { decodeCursor, toPage } from '../../http/schemas';
import { type AuditRow, insertAuditEvent, listAuditEvents, type Role, type SessionRow } from './repository';
import { isMember } from './service';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Who did it, from a session: the member and the session. */
export interface AuditActor {
  providerId: string;
  /** Null for a sign-in or sign-out, which is not of one environment. */
  environment: string | null;
  userId: string;
  email: string;
  role: Role;
  sessionId: string;
}

/**
 * The console's audit log: every change a member makes through the API with their session, and
 * their sign-ins and sign-outs, with who, what (the operationId), when, from where (address and
 * user agent), the answer's status and the request id. Written after the answer (it records how
 * the request ended); a write that fails is logged as an error, never turned into the request's.
 */
export class ConsoleAudit {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  async record(actor: AuditActor, request: FastifyRequest, status: number): Promise<void> {
    const route = request.routeOptions.url ?? request.url;
    const row: AuditRow = {
      id: newId(ID.auditEvent),
      provider_id: actor.providerId,
      environment: actor.environment,
      user_id: actor.userId,
      email: actor.email,
      role: actor.role,
      session_id: actor.sessionId,
      operation: OPERATION_IDS[`${request.method} ${route}`] ?? `${request.method} ${route}`,
      method: request.method,
      path: request.url.split('?')[0] ?? request.url,
      status,
      request_id: request.id,
      address: request.ip,
      user_agent: request.headers['user-agent']?.slice(0, 500) ?? null,
      created_at: this.clock.now(),
    };
    try {
      await insertAuditEvent(this.pool, row);
    } catch (error) {
      this.logger.error({ err: error, audit: row }, 'a console audit event could not be written');
    }
  }

  /**
   * In the API's authenticated routes: each change a member's session made is recorded with how
   * it was answered, whatever the answer (a validation failure is a change tried), before the
   * answer leaves: the member's next request reads it in the log, and an answered change is
   * never missing from it.
   */
  install(scope: App): void {
    scope.addHook('onSend', async (request, reply, payload) => {
      if (isMember(request.auth) && !SAFE_METHODS.has(request.method))
        await this.record(request.auth, request, reply.statusCode);
      return payload;
    });
  }

  async list(providerId: string, query: { limit: number; cursor?: string | undefined }) {
    const rows = await listAuditEvents(this.pool, providerId, {
      before: decodeCursor(query.cursor) ?? null,
      limit: query.limit + 1,
    });
    return toPage(rows, query.limit, (row) => ({
      id: row.id,
      createdAt: row.created_at.toISOString(),
      actor: { userId: row.user_id, email: row.email, role: row.role },
      environment: row.environment,
      operation: row.operation,
      method: row.method,
      path: row.path,
      status: row.status,
      requestId: row.request_id,
      address: row.address,
      userAgent: row.user_agent,
    }));
  }
}

/** An audit actor from a session row (its sign-ins and sign-outs). */
export const actorOf = (row: SessionRow, role: Role): AuditActor => ({
  providerId: row.provider_id,
  environment: null,
  userId: row.user_id,
  email: row.email,
  role,
  sessionId: row.id,
});
