import { type Options as SerializerOptions, SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ID, inspectJson, type Logger, newId } from '@mcp-meter/contracts/kit';
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
import type { AuthContext } from '../tenancy';
import { clientErrorAnswer, installErrorHandling } from './error-handler';
import type { ControlPlaneMetrics } from './metrics';
import { OPERATION_DESCRIPTIONS } from './operation-docs';
import { withExamples } from './operation-examples';
import { OPERATION_IDS } from './operation-ids';
import { proxyPaths } from './proxy-paths';
import { RequestLogger } from './request-logger';
import { Problem } from './schemas';

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
 * Route schemas are compiled when first used, not while the server starts: compiling the
 * validators and serializers of every route took about a second of each start, and the API
 * answers sooner after a restart. `warmSchemas` compiles the rest in the background once the
 * server listens, one at a time between requests, so a schema error still shows at start.
 */
class LazySchemas {
  private readonly pending = new Set<() => void>();

  /** A function that compiles with `compile` on its first call and behaves as the result. */
  lazy<F extends (data: never) => unknown>(compile: () => F): F & { errors?: unknown } {
    let compiled: (F & { errors?: unknown }) | undefined;
    const ensure = () => {
      compiled ??= compile() as F & { errors?: unknown };
      this.pending.delete(ensure);
      return compiled;
    };
    this.pending.add(ensure);
    const run = ((data: never) => {
      const fn = ensure();
      const result = fn(data);
      // Fastify reads a failed validator's errors from the function it was given.
      run.errors = fn.errors;
      return result;
    }) as F & { errors?: unknown };
    return run;
  }

  warm(logger: Logger): void {
    const next = () => {
      const [ensure] = this.pending;
      if (ensure === undefined) return;
      try {
        ensure();
      } catch (error) {
        this.pending.delete(ensure);
        logger.error({ err: error }, 'route schema does not compile');
      }
      setImmediate(next).unref();
    };
    setImmediate(next).unref();
  }
}

const lazySchemas = new WeakMap<FastifyInstance, LazySchemas>();

/** Compiles, in the background, every route schema not used yet (call once the server listens). */
export function warmSchemas(app: FastifyInstance, logger: Logger): void {
  lazySchemas.get(app)?.warm(logger);
}

/**
 * Bodies are validated strictly: no type coercion ("10" is not a price) and unknown fields are
 * refused rather than silently dropped. Query strings and path params arrive as text, so those
 * are coerced.
 */
function installValidation(app: FastifyInstance, schemas: LazySchemas): void {
  const bodyAjv = makeAjv({ coerceTypes: false });
  const textAjv = makeAjv({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) =>
    schemas.lazy(() => (httpPart === 'body' ? bodyAjv : textAjv).compile(schema)),
  );
}

/**
 * Where a NUL character sits below a parsed value, as a JSON pointer relative to it ('' for the
 * value itself). The pointer is built on the way back from a NUL, so a value without one (most
 * requests) costs a walk and no strings.
 */
function nulBelow(value: unknown): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? '' : undefined;
  // A raw body kept as bytes (a signed webhook) is the route's to read, not text to store.
  if (Buffer.isBuffer(value)) return undefined;
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulBelow(value[i]);
      if (found !== undefined) return `/${i}${found}`;
    }
    return undefined;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const found = key.includes('\u0000') ? '' : nulBelow((value as Record<string, unknown>)[key]);
    if (found === undefined) continue;
    const escaped = key.replaceAll('~', '~0').replaceAll('/', '~1').replaceAll('\u0000', '\\u0000');
    return `/${escaped}${found}`;
  }
  return undefined;
}

/** Where a NUL character sits in a parsed value (a key or a string), as a JSON pointer. */
export function nulPath(value: unknown): string | undefined {
  const found = nulBelow(value);
  return found === '' ? '/' : found;
}

/**
 * A request sent without a body to a route whose body is a JSON object is read as `{}`, as
 * Stripe's API reads one: a call whose fields are all optional (rotate a secret, cancel a
 * purchase now) needs no body, and one that misses a required field is told which field, not
 * that the body "must be object". A body sent as `null` or any other value is validated as sent.
 */
function readMissingBodyAsEmpty(app: FastifyInstance): void {
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined) {
      const schema = request.routeOptions.schema?.body as { type?: unknown } | undefined;
      if (schema?.type === 'object') request.body = {};
    }
    done();
  });
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

/** The deepest nesting of arrays and objects a JSON body may have (docs/api.md). */
export const MAX_JSON_DEPTH = 64;

/**
 * JSON bodies through Fastify's own parser (prototype poisoning refused), then refused with 400
 * `too_deep` when they nest deeper than MAX_JSON_DEPTH: what reads a body after it (validation,
 * the NUL check, services) may then walk it without running out of stack.
 */
function parseJsonWithinDepth(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    parse(request, body as string, (error: Error | null, value?: unknown) => {
      if (error !== null) return done(error, undefined);
      const problem = inspectJson(body as string, MAX_JSON_DEPTH, undefined, { surrogates: false });
      if (problem?.code === 'too_deep')
        return done(
          new DomainError('too_deep', `The body nests deeper than ${MAX_JSON_DEPTH} levels`, {
            limit: MAX_JSON_DEPTH,
          }),
          undefined,
        );
      done(null, value);
    });
  });
}

/** An error answer as the service sends it: an RFC 9457 problem, `application/problem+json`. */
const PROBLEM_RESPONSE = {
  description: 'An RFC 9457 problem; `code` says which, machine-readably',
  content: { 'application/problem+json': { schema: Problem } },
};

/**
 * A route's responses as the OpenAPI document shows them: its problems under the media type they
 * are sent with, and, for a route that answers problems at all (it needs the database, the cache
 * or the bus behind it), the 503 any such call can answer while one of those is away.
 */
function documentedResponses(response: unknown): unknown {
  if (response === null || typeof response !== 'object') return response;
  const entries = Object.entries(response as Record<string, unknown>);
  if (!entries.some(([, schema]) => schema === Problem)) return response;
  const documented = Object.fromEntries(
    entries.map(([status, schema]) => [status, schema === Problem ? PROBLEM_RESPONSE : schema]),
  );
  documented['503'] ??= PROBLEM_RESPONSE;
  return documented;
}

/** The Idempotency-Key header of a route that takes one (http/idempotency.ts), as documented. */
function idempotencyHeader(mode: 'optional' | 'required') {
  return {
    type: 'object',
    properties: {
      'Idempotency-Key': {
        type: 'string',
        minLength: 1,
        maxLength: 255,
        pattern: '^[\\x21-\\x7e]+$',
        description:
          'Any unique string (a UUID): the same key with the same body within 24 hours answers the first response again instead of applying the request twice; with another body, 422',
      },
    },
    ...(mode === 'required' ? { required: ['Idempotency-Key'] } : {}),
  };
}

export interface AppOptions {
  logger: Logger;
  bodyLimitBytes: number;
  /**
   * Whose request this is, for the routes below: a provider's secret key, or a console member's
   * session (its role checked for the route). Throws the API's 401/403 problems otherwise.
   */
  authenticate: (request: FastifyRequest) => Promise<AuthContext>;
  /** Routes that need a provider secret key (or a console session). */
  authenticated: (scope: App) => Promise<void>;
  /** Routes open to anyone (health). */
  open?: (scope: App) => Promise<void>;
  /** Where the API is reached from outside (PUBLIC_URL): the OpenAPI document's server. */
  publicUrl?: string | undefined;
  /** Where the MCP proxy is reached (PROXY_PUBLIC_URL): the server of its paths in the document. */
  proxyUrl: string;
  /** Counts every answer for the metrics page (GET /metrics, registered with the open routes). */
  metrics?: ControlPlaneMetrics | undefined;
}

export async function buildApp(options: AppOptions): Promise<App> {
  const schemas = new LazySchemas();
  const base = Fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    bodyLimit: options.bodyLimitBytes,
    // A caller's own x-request-id is kept (to follow one call across systems) when it is a short
    // printable token, else one is made; every answer carries it, so a problem can be quoted to
    // support and found in the logs.
    requestIdHeader: false,
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && /^[\x21-\x7e]{1,128}$/.test(given) ? given : newId(ID.request);
    },
    clientErrorHandler: clientErrorAnswer,
    childLoggerFactory: RequestLogger.factory,
    schemaController: {
      compilersFactory: {
        // Fastify's own response serializers (fast-json-stringify), compiled on first use.
        buildSerializer: (externalSchemas: unknown, serializerOpts?: SerializerOptions) => {
          const compile = SerializerSelector()(externalSchemas, serializerOpts);
          return (route: Parameters<typeof compile>[0]) => schemas.lazy(() => compile(route));
        },
      },
    },
  });
  lazySchemas.set(base, schemas);
  options.metrics?.install(base);
  base.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  // JSON only: other media types are refused with 415 instead of reaching validation as strings.
  base.removeContentTypeParser('text/plain');
  parseJsonWithinDepth(base);
  installValidation(base, schemas);
  installErrorHandling(base);
  refuseNulCharacters(base);
  readMissingBodyAsEmpty(base);
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
      // The document is served by the API itself: without a public URL, its own location.
      servers: [{ url: options.publicUrl ?? '/', description: 'This service' }],
      components: {
        securitySchemes: {
          customerToken: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description:
              'A customer access token: from MCP sign-in (OAuth) or minted by the provider (POST /v1/sdk/customers/{ref}/tokens)',
          },
          consoleSession: {
            type: 'apiKey',
            in: 'cookie',
            name: 'mcpm_console',
            description:
              'A console member’s session (POST /v1/console/sessions sets it), within the member’s role; changes also need X-CSRF-Token, and MCP-Meter-Environment picks sandbox (default) or live',
          },
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description:
              'A secret key (sk_test_… or sk_sandbox_… for the sandbox, sk_live_… for live); it decides the environment',
          },
        },
      },
      // A secret key, or a console member's session cookie.
      security: [{ bearerAuth: [] }, { consoleSession: [] }],
    },
    // The proxy's endpoints, served by the proxy, described beside the API (proxy-paths.ts), and
    // every operation's recorded example (operation-examples.ts).
    transformObject: (document) => {
      if (!('openapiObject' in document)) return document.swaggerObject;
      const { openapiObject } = document;
      return {
        ...openapiObject,
        paths: withExamples({
          ...openapiObject.paths,
          ...(proxyPaths(options.proxyUrl) as typeof openapiObject.paths),
        }),
      };
    },
    // Every operation carries its stable operationId (operation-ids.ts).
    transform: ({ schema, url, route }) => {
      const method = Array.isArray(route.method) ? route.method[0] : route.method;
      const operationId = OPERATION_IDS[`${method} ${url}`];
      const description = schema?.description ?? OPERATION_DESCRIPTIONS[`${method} ${url}`];
      if (schema === undefined || operationId === undefined) return { schema, url };
      const idempotency = (route.config as { idempotency?: 'optional' | 'required' } | undefined)
        ?.idempotency;
      return {
        schema: {
          ...schema,
          operationId,
          ...(description === undefined ? {} : { description }),
          response: documentedResponses(schema.response),
          ...(idempotency === undefined ? {} : { headers: idempotencyHeader(idempotency) }),
        } as typeof schema,
        url,
      };
    },
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  if (options.open !== undefined) {
    const open = options.open;
    await app.register(async (scope) => {
      // Open routes take no API key: the document says so, unless a route names its own scheme.
      scope.addHook('onRoute', (route) => {
        route.schema = { ...route.schema, security: route.schema?.security ?? [] };
      });
      await open(scope);
    });
  }

  await app.register(async (scope) => {
    scope.addHook('onRequest', async (request) => {
      request.auth = await options.authenticate(request);
      request.log = request.log.child({
        providerId: request.auth.providerId,
        environment: request.auth.environment,
      });
    });
    await options.authenticated(scope);
  });
  return app;
}
