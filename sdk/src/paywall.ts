import type { MeterClient } from './client.js';
import type { Problem } from './errors.js';
import type { paths } from './schema.js';

type LimitAnswer = paths['/v1/sdk/limits']['post']['responses']['200']['content']['application/json'];

/**
 * A paywall for an API you sell (not behind the MCP proxy): before a request runs, one call of
 * the customer's plan for `productRef` is checked and consumed (`POST /v1/sdk/limits`); a customer
 * over the limit, without a plan or out of credits gets 402 with where to pay.
 */
export interface PaywallOptions<Request> {
  meter: MeterClient;
  /** The product whose plans the calls count against: its id (`prd_…`) or reference. */
  productRef: string;
  /** Your customer's reference (our id or your externalRef) for a request; undefined answers 401. */
  customer: (request: Request) => string | undefined | Promise<string | undefined>;
  /** Which of the product's meters the call counts on (default its requests meter). */
  meterName?: string;
  /**
   * When the API cannot be asked (down, or answering 5xx after the retries): refuse with 503
   * (default, nothing runs unmetered) or let the request through unmetered.
   */
  whenUnavailable?: 'refuse' | 'allow';
}

/** What the paywall decided: run the request (with the plan's standing), or answer `status` with `problem`. */
export type PaywallDecision =
  | { allowed: true; limit: LimitAnswer | undefined }
  | { allowed: false; status: 401 | 402 | 403 | 503; problem: Problem; headers: Record<string, string> };

const TITLES = { 401: 'Unauthorized', 402: 'Payment required', 403: 'Forbidden', 503: 'Service unavailable' };

const problemOf = (
  status: 401 | 402 | 403 | 503,
  code: string,
  detail: string,
  extra: object = {},
): Problem => ({
  type: 'about:blank',
  title: TITLES[status],
  status,
  code,
  detail,
  ...extra,
});

const REFUSALS: Record<string, string> = {
  limit_reached: "The plan's limit for this period is used up",
  plan_required: 'A paid plan is needed for this product',
  no_plan: 'The customer has no plan for this product',
  credits_exhausted: 'The credits that pay for calls are used up',
};

/** Asks the API whether one call of `request` may run, and consumes it if so. */
export async function decide<Request>(
  options: PaywallOptions<Request>,
  request: Request,
): Promise<PaywallDecision> {
  const customerRef = await options.customer(request);
  if (customerRef === undefined || customerRef === '')
    return {
      allowed: false,
      status: 401,
      problem: problemOf(401, 'unauthorized', 'The request does not say which customer it is for'),
      headers: {},
    };
  const body = {
    customerRef,
    productRef: options.productRef,
    ...(options.meterName === undefined ? {} : { meterName: options.meterName }),
  };
  let answer: Awaited<ReturnType<typeof check>> | undefined;
  const check = () => options.meter.POST('/v1/sdk/limits', { body });
  try {
    answer = await check();
  } catch {
    answer = undefined;
  }
  if (answer === undefined || answer.response.status >= 500) {
    if (options.whenUnavailable === 'allow') return { allowed: true, limit: undefined };
    const retryAfter = answer?.response.headers.get('retry-after') ?? '1';
    return {
      allowed: false,
      status: 503,
      problem: problemOf(503, 'dependency_unavailable', 'The usage limit could not be checked; try again'),
      headers: { 'retry-after': retryAfter },
    };
  }
  if (
    answer.response.status === 404 &&
    (answer.error as { code?: string } | undefined)?.code === 'customer_not_found'
  )
    // Someone your own authentication let in, but not a customer here (yet): create customers
    // as they sign up (POST /v1/sdk/customers/ensure). Refused, not an error of the server.
    return {
      allowed: false,
      status: 403,
      problem: problemOf(403, 'customer_not_found', `No customer ${customerRef} for this API`),
      headers: {},
    };
  if (!answer.response.ok)
    // Any other 4xx is the integration's own mistake (a wrong key, an unknown product): say so loudly.
    throw new Error(
      `the paywall's limit check was refused: ${answer.response.status} ${JSON.stringify(answer.error)}`,
    );
  const limit = answer.data as LimitAnswer;
  if (limit.withinLimits) return { allowed: true, limit };
  const reason = limit.reason ?? 'limit_reached';
  return {
    allowed: false,
    status: 402,
    problem: problemOf(402, reason, REFUSALS[reason] ?? 'Payment required', {
      limit: limit.limit,
      used: limit.used,
      ...(limit.checkoutUrl === undefined ? {} : { checkoutUrl: limit.checkoutUrl }),
      ...(limit.checkoutSessionId === undefined ? {} : { checkoutSessionId: limit.checkoutSessionId }),
    }),
    headers: limit.checkoutUrl === undefined ? {} : { link: `<${limit.checkoutUrl}>; rel="payment"` },
  };
}

/** The few parts of Node's ServerResponse (Express, Connect, node:http) the middleware uses. */
interface NodeResponse {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body: string): unknown;
}

/** Express, Connect or plain node:http middleware: `app.use(paywallExpress({ … }))`. */
export function paywallExpress<Request>(options: PaywallOptions<Request>) {
  return (request: Request, response: NodeResponse, next: (error?: unknown) => void): void => {
    decide(options, request).then(
      (decision) => {
        if (decision.allowed) return next();
        response.statusCode = decision.status;
        response.setHeader('content-type', 'application/problem+json');
        for (const [name, value] of Object.entries(decision.headers)) response.setHeader(name, value);
        response.end(JSON.stringify(decision.problem));
      },
      (error: unknown) => next(error),
    );
  };
}

/** The few parts of Fastify's reply the hook uses. */
interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  send(body: string): unknown;
}

/** A Fastify `preHandler` hook: `app.addHook('preHandler', paywallFastify({ … }))`. */
export function paywallFastify<Request>(options: PaywallOptions<Request>) {
  return async (request: Request, reply: FastifyReplyLike): Promise<void> => {
    const decision = await decide(options, request);
    if (decision.allowed) return;
    reply.code(decision.status).header('content-type', 'application/problem+json');
    for (const [name, value] of Object.entries(decision.headers)) reply.header(name, value);
    await reply.send(JSON.stringify(decision.problem));
  };
}

/** Hono middleware (or any handler given a context and `next`): `app.use(paywallHono({ … }))`. */
export function paywallHono<Context>(options: PaywallOptions<Context>) {
  return async (context: Context, next: () => Promise<void>): Promise<Response | undefined> => {
    const decision = await decide(options, context);
    if (decision.allowed) {
      await next();
      return undefined;
    }
    return new Response(JSON.stringify(decision.problem), {
      status: decision.status,
      headers: { 'content-type': 'application/problem+json', ...decision.headers },
    });
  };
}
