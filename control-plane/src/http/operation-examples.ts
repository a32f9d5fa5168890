import recorded from './operation-examples.json' with { type: 'json' };

/**
 * One operation's example, as the reference (`/docs`) and generated clients show it: a request
 * that was sent to the running service and the answer it gave. The examples are recorded, never
 * written by hand: control-plane/test/api-examples.test.ts makes every call against the service
 * on real PostgreSQL, Redis and ClickHouse, fails when an answer no longer has the shape of its
 * example, and writes them again with MCPMETER_WRITE_EXAMPLES=1 (`npm run examples:generate`).
 */
export interface OperationExample {
  request: {
    path?: Record<string, string>;
    query?: Record<string, string | number | boolean>;
    /** A JSON body. */
    body?: unknown;
    /** A form body (application/x-www-form-urlencoded). */
    form?: Record<string, string>;
  };
  status: number;
  /** The JSON answer (shown on the JSON media types); absent for pages and redirects. */
  response?: unknown;
}

/** The examples by operationId (operation-ids.ts). */
export const OPERATION_EXAMPLES = recorded as unknown as Readonly<Record<string, OperationExample>>;

interface DocumentedOperation {
  operationId?: string;
  parameters?: Array<{ in: string; name: string; example?: unknown }>;
  requestBody?: { content?: Record<string, { example?: unknown }> };
  responses?: Record<string, { content?: Record<string, { example?: unknown }> }>;
}

const FORM = 'application/x-www-form-urlencoded';

/**
 * Writes each operation's example into the document's `paths`: its path and query parameters',
 * its request body's (the JSON one, or the form one when that was sent) and its answer's.
 */
export function withExamples<T>(paths: T): T {
  for (const methods of Object.values(paths as Record<string, Record<string, DocumentedOperation>>))
    for (const operation of Object.values(methods)) {
      const example =
        operation.operationId === undefined ? undefined : OPERATION_EXAMPLES[operation.operationId];
      if (example === undefined) continue;
      const { request } = example;
      for (const parameter of operation.parameters ?? []) {
        const value =
          parameter.in === 'path'
            ? request.path?.[parameter.name]
            : parameter.in === 'query'
              ? request.query?.[parameter.name]
              : undefined;
        if (value !== undefined) parameter.example = value;
      }
      const bodies = operation.requestBody?.content ?? {};
      for (const [type, media] of Object.entries(bodies)) {
        const body = type === FORM ? request.form : request.form === undefined ? request.body : undefined;
        if (body !== undefined) media.example = body;
      }
      if (example.response === undefined) continue;
      const answers = operation.responses?.[String(example.status)]?.content ?? {};
      for (const [type, media] of Object.entries(answers))
        if (/json/.test(type)) media.example = example.response;
    }
  return paths;
}
