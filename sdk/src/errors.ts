/**
 * A problem the API answered (RFC 9457 `application/problem+json`): every error carries a
 * machine `code` from one closed list (docs/api.md), and 400 `validation_failed` names each bad
 * field in `errors`.
 */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  errors?: Array<{ path: string; message: string; location?: string }>;
  [extension: string]: unknown;
}

/** An answer outside 2xx, thrown by `orThrow`: the status, the problem's code and the whole problem. */
export class MeterApiError extends Error {
  readonly status: number;
  /** The problem's machine code (`validation_failed`, `not_found`, …), or `http_<status>` if none. */
  readonly code: string;
  readonly problem: Problem;
  /** The request id the service logged the call under (`x-request-id`), for support. */
  readonly requestId: string | undefined;

  constructor(response: Response, body: unknown) {
    const problem: Problem =
      body !== null && typeof body === 'object' ? (body as Problem) : { detail: String(body ?? '') };
    const code = typeof problem.code === 'string' ? problem.code : `http_${response.status}`;
    super(`${response.status} ${code}: ${problem.detail ?? problem.title ?? response.statusText}`);
    this.name = 'MeterApiError';
    this.status = response.status;
    this.code = code;
    this.problem = problem;
    this.requestId = response.headers.get('x-request-id') ?? undefined;
  }
}

/** What every openapi-fetch call settles to. */
export interface Answer<Data> {
  data?: Data;
  error?: unknown;
  response: Response;
}

/**
 * The data of a successful answer, or a thrown `MeterApiError` for any other:
 * `const customer = await orThrow(meter.GET('/v1/sdk/customers/{ref}', { params: { path: { ref } } }))`.
 */
export async function orThrow<Data>(pending: Promise<Answer<Data>>): Promise<Data> {
  const { data, error, response } = await pending;
  if (!response.ok) throw new MeterApiError(response, error);
  return data as Data;
}
