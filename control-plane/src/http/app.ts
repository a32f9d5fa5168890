import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Logger } from '@mcp-meter/contracts/kit';
import { Ajv, type Options as AjvOptions } from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  type RawReplyDefaultExpression,
  type RawRequestDefaultExpression,
  type RawServerDefault,
} from 'fastify';
import { DomainError, ValidationError } from '../errors';
import type { AuthContext, ProviderService } from '../modules/providers/service';
import { installErrorHandling } from './error-handler';

export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext | null;
  }
}

/** The authenticated provider and environment of a request inside the authenticated scope. */
export function authOf(request: FastifyRequest): AuthContext {
  if (request.auth === null) throw new Error('route is outside the authenticated scope');
  return request.auth;
}

/** The caller of a sandbox-only route: a live key is answered as if the route did not exist. */
export function sandboxAuthOf(request: FastifyRequest): AuthContext {
  const auth = authOf(request);
  if (auth.environment !== 'sandbox')
    throw new DomainError('sandbox_only', 'This operation exists in sandbox only; use a sandbox key');
  return auth;
}

function makeAjv(options: AjvOptions): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    strict: false,
    useDefaults: true,
    removeAdditional: false,
    ...options,
  });
  addFormats.default(ajv);
  // ajv-formats' uri lets through forms no URL parser takes (`http://` alone), which then failed
  // wherever the value was parsed: a uri must also parse as a WHATWG URL.
  const uri = ajv.formats.uri;
  const loose = (value: string) =>
    typeof uri === 'function'
      ? uri(value)
      : uri instanceof RegExp
        ? uri.test(value)
        : typeof uri === 'object' && 'validate' in uri && typeof uri.validate === 'function'
          ? Boolean((uri.validate as (v: string) => unknown)(value))
          : true;
  ajv.addFormat('uri', (value: string) => URL.canParse(value) && loose(value));
  return ajv;
}

/**
 * Bodies are validated strictly: no type coercion ("10" is not a price) and unknown fields are
 * refused rather than silently dropped. Query strings and path params arrive as text, so those
 * are coerced.
 */
function installValidation(app: FastifyInstance): void {
  const bodyAjv = makeAjv({ coerceTypes: false });
  const textAjv = makeAjv({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body' ? bodyAjv.compile(schema) : textAjv.compile(schema),
  );
}

/** Where a NUL character sits in a parsed value (a key or a string), as a JSON pointer. */
export function nulPath(value: unknown, path = ''): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path || '/' : undefined;
  // A raw body kept as bytes (a signed webhook) is the route's to read, not text to store.
  if (Buffer.isBuffer(value)) return undefined;
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulPath(value[i], `${path}/${i}`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const here = `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    if (key.includes('\u0000')) return here.replaceAll('\u0000', '\\u0000');
    const found = nulPath(item, here);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * PostgreSQL cannot store U+0000 in text or jsonb, so a NUL anywhere in a path parameter, query
 * or body is refused here, naming where it is, before any route or query sees it.
 */
function refuseNulCharacters(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    for (const [location, value] of [
      ['params', request.params],
      ['querystring', request.query],
      ['body', request.body],
    ] as const) {
      const path = nulPath(value);
      if (path !== undefined)
        throw new ValidationError([
          { path, message: 'must not contain the NUL character (U+0000)', location },
        ]);
    }
  });
}

export interface AppOptions {
  logger: Logger;
  bodyLimitBytes: number;
  providers: ProviderService;
  /** Routes that need a provider secret key. */
  authenticated: (scope: App) => Promise<void>;
  /** Routes open to anyone (health). */
  open?: (scope: App) => Promise<void>;
}

export async function buildApp(options: AppOptions): Promise<App> {
  const base = Fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    bodyLimit: options.bodyLimitBytes,
    requestIdHeader: 'x-request-id',
  });
  // JSON only: other media types are refused with 415 instead of reaching validation as strings.
  base.removeContentTypeParser('text/plain');
  installValidation(base);
  installErrorHandling(base);
  refuseNulCharacters(base);
  const app: App = base.withTypeProvider<TypeBoxTypeProvider>();
  app.decorateRequest('auth', null);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'MCP Meter API',
        version: '1.0',
        description: 'Products, plans, usage metering and billing for MCP servers, APIs and software.',
      },
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      },
      security: [{ bearerAuth: [] }],
    },
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  if (options.open !== undefined) await app.register(options.open);

  await app.register(async (scope) => {
    scope.addHook('onRequest', async (request) => {
      request.auth = await options.providers.authenticate(request.headers.authorization);
      request.log = request.log.child({
        providerId: request.auth.providerId,
        environment: request.auth.environment,
      });
    });
    await options.authenticated(scope);
  });
  return app;
}
