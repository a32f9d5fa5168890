import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from '../../sdk/src/schema';

/**
 * The console's one door to the service: the public API, typed from /openapi.json (the SDK's
 * generated `paths`, never written by hand), called with the session cookie. Every call names
 * the environment the switch shows (MCP-Meter-Environment) and carries the session's CSRF token;
 * a problem answer becomes an ApiProblem the forms read field by field.
 */

export type Environment = 'sandbox' | 'live';

export interface FieldProblem {
  path: string;
  message: string;
  location?: string;
}

/** An RFC 9457 problem, as the API answers every refusal. */
export class ApiProblem extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
    readonly errors: FieldProblem[] = [],
    /** The whole problem, with what its code adds (provider_required lists `providers`). */
    readonly body: Record<string, unknown> = {},
  ) {
    super(detail);
  }

  /** The message for one body field (`/name`), if the API named it. */
  field(name: string): string | undefined {
    return this.errors.find((e) => e.path === `/${name}` || e.path.startsWith(`/${name}/`))?.message;
  }
}

const ENV_KEY = 'mcpm.environment';
let environment: Environment = localStorage.getItem(ENV_KEY) === 'live' ? 'live' : 'sandbox';
let csrfToken: string | undefined;

export const currentEnvironment = (): Environment => environment;
export function setEnvironment(next: Environment): void {
  environment = next;
  localStorage.setItem(ENV_KEY, next);
}
export function setCsrfToken(token: string | undefined): void {
  csrfToken = token;
}

const headers: Middleware = {
  onRequest({ request }) {
    request.headers.set('MCP-Meter-Environment', environment);
    if (csrfToken !== undefined) request.headers.set('X-CSRF-Token', csrfToken);
    return request;
  },
};

export const api = createClient<paths>({ baseUrl: window.location.origin, credentials: 'same-origin' });
api.use(headers);

/** The data of an answer, or its problem thrown. */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let answer: { data?: T; error?: unknown; response: Response };
  try {
    answer = await call;
  } catch {
    throw new ApiProblem(0, 'network_error', 'The service could not be reached; check your connection');
  }
  if (answer.response.ok) return answer.data as T;
  const problem = (answer.error ?? {}) as {
    code?: string;
    detail?: string;
    title?: string;
    errors?: FieldProblem[];
  };
  throw new ApiProblem(
    answer.response.status,
    problem.code ?? 'error',
    problem.detail ?? problem.title ?? `The service answered ${answer.response.status}`,
    problem.errors ?? [],
    problem as Record<string, unknown>,
  );
}

// Money in minor units, read and shown per currency: pure functions of their own module.
export { amountExample, decimal, decimalsOf, minorName, minorOf, money } from './money';
