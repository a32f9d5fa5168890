import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  DomainError,
  ERROR_STATUS,
  type ErrorCode,
  type FieldProblem,
  isDependencyOutage,
  isTransactionConflict,
  RETRY_AFTER_SECONDS,
} from '../errors';
import { problemDocument, STATUS_TITLES } from './problem';

export function sendProblem(
  reply: FastifyReply,
  code: ErrorCode,
  detail: string,
  extra: Record<string, unknown> = {},
): FastifyReply {
  const status = ERROR_STATUS[code];
  if (status === 401) reply.header('WWW-Authenticate', 'Bearer realm="api"');
  // Every 503 says when to come back, whichever dependency it is about.
  if (status === 503 && !reply.hasHeader('retry-after'))
    reply.header('Retry-After', String(RETRY_AFTER_SECONDS));
  return reply
    .status(status)
    .type('application/problem+json')
    .send({ ...problemDocument(code, detail), ...extra });
}

interface AjvLikeError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

export function ajvToProblems(
  errors: readonly AjvLikeError[],
  location: FieldProblem['location'],
): FieldProblem[] {
  return errors.map((error) => {
    let path = error.instancePath ?? '';
    let message = error.message ?? 'is invalid';
    if (error.keyword === 'required' && typeof error.params?.missingProperty === 'string') {
      path = `${path}/${error.params.missingProperty}`;
      message = 'is required';
    } else if (
      error.keyword === 'additionalProperties' &&
      typeof error.params?.additionalProperty === 'string'
    ) {
      path = `${path}/${error.params.additionalProperty}`;
      message = 'is not a known field';
    } else if (error.keyword === 'enum' && Array.isArray(error.params?.allowedValues)) {
      message = `must be one of: ${error.params.allowedValues.join(', ')}`;
    }
    return { path: path === '' ? '/' : path, message, location };
  });
}

/**
 * Replaces Fastify's default handler, which would forward raw messages on 500. Domain errors
 * map through ERROR_STATUS; framework 4xx errors get a code; anything else is a 500 whose body
 * says nothing about internals (the log has the details).
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (error instanceof DomainError) {
      const status = ERROR_STATUS[error.code];
      if (status >= 500) request.log.error({ err: error }, 'dependency unavailable');
      else request.log.info({ code: error.code }, error.message);
      return sendProblem(reply, error.code, error.message, error.details);
    }
    if (error.validation) {
      const location = (error.validationContext ?? 'body') as FieldProblem['location'];
      const errors = ajvToProblems(error.validation, location);
      request.log.info({ errors }, 'request validation failed');
      return sendProblem(reply, 'validation_failed', `The ${location} is invalid`, { errors });
    }
    const status = error.statusCode ?? 500;
    if (status === 413) return sendProblem(reply, 'payload_too_large', 'The request body is too large');
    if (status === 415)
      return sendProblem(reply, 'unsupported_media_type', 'Send the body as application/json');
    if (status === 405) return sendProblem(reply, 'method_not_allowed', 'Method not allowed');
    if (status >= 400 && status < 500) {
      const isJson =
        error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ||
        error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ||
        error instanceof SyntaxError;
      return sendProblem(
        reply,
        isJson ? 'invalid_json' : 'invalid_request',
        isJson ? 'The body is not valid JSON' : error.message,
      );
    }
    // PostgreSQL data exceptions (class 22: a value out of range, too long, not representable)
    // come from input that got past validation: the request is refused, not the server broken.
    const sqlState = (error as { code?: unknown }).code;
    if (typeof sqlState === 'string' && /^22[0-9A-Z]{3}$/.test(sqlState) && 'severity' in error) {
      request.log.warn({ err: error }, 'value refused by the database');
      return sendProblem(
        reply,
        'invalid_request',
        'A value in the request cannot be stored (out of range or not representable)',
      );
    }
    if (isTransactionConflict(error)) {
      request.log.warn({ err: error }, 'transaction aborted by a concurrent one');
      reply.header('Retry-After', '1');
      return sendProblem(
        reply,
        'lock_timeout',
        'Another request was changing the same objects at the same moment; nothing was changed; retry',
      );
    }
    if (isDependencyOutage(error)) {
      request.log.warn({ err: error }, 'dependency unavailable');
      return sendProblem(
        reply,
        'dependency_unavailable',
        'A service this request needs is unreachable right now; nothing was changed; retry shortly',
      );
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendProblem(reply, 'internal_error', 'An internal error occurred; it has been logged');
  });
  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, 'route_not_found', `No route for ${request.method} ${request.url.split('?')[0]}`),
  );
}

/**
 * The answer to a request Node's HTTP server could not read, before Fastify sees it (a byte no
 * request line may hold, headers past the size limit, a request that never finished): the same
 * problem+json as every other error, where Fastify's default wrote its own bare JSON. The
 * connection is closed after it, as Node does.
 */
export function clientErrorAnswer(error: NodeJS.ErrnoException, socket: Duplex): void {
  // A reset connection is gone: there is no one to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [code, detail]: [ErrorCode, string] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? ['request_timeout', 'The request did not arrive in time']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? ['headers_too_large', 'The request headers are larger than this service takes']
        : [
            'malformed_request',
            'The request could not be read as HTTP/1.1 (percent-encode what is not ASCII)',
          ];
  const status = ERROR_STATUS[code];
  const body = JSON.stringify(problemDocument(code, detail));
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_TITLES[status] ?? 'Error'}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/problem+json\r\nConnection: close\r\n\r\n${body}`,
    );
  socket.destroy(error);
}
