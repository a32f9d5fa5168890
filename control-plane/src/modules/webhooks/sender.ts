import type { OutboundGuard } from '@mcp-meter/contracts/kit';
import { Agent, request } from 'undici';

export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  responseExcerpt: string | null;
  /** From Retry-After on 429/503, in milliseconds. */
  retryAfterMs: number | null;
}

const EXCERPT_BYTES = 1024;
export const USER_AGENT = 'mcp-meter-webhooks/0.1 (+webhooks)';

function retryAfter(value: string | string[] | undefined, now: number): number | null {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return null;
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/**
 * POSTs one signed body to one endpoint: no redirects (a 3xx is a failure), a hard timeout for
 * the whole exchange, connections only to addresses the guard accepted, and at most 1 KiB of the
 * answer kept for the attempt log.
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(
    private readonly guard: OutboundGuard,
    private readonly timeoutMs: number,
  ) {
    this.agent = new Agent({
      connect: { timeout: Math.min(timeoutMs, 5_000), lookup: guard.lookup } as never,
      // The abort signal below ends each exchange at timeoutMs; these only back it up.
      headersTimeout: timeoutMs + 1_000,
      bodyTimeout: timeoutMs + 1_000,
      keepAliveTimeout: 10_000,
      connections: 8,
    });
  }

  async send(url: string, body: string, headers: Record<string, string>): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const failure = (error: string): SendResult => ({
      ok: false,
      statusCode: null,
      latencyMs: elapsed(),
      error,
      responseExcerpt: null,
      retryAfterMs: null,
    });
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return failure('invalid URL');
    }
    // Literal addresses never pass through lookup: checked here, with the port.
    const refused = this.guard.literalProblem(target);
    if (refused !== undefined) return failure(`refused: ${refused}`);
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      const response = await request(url, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'user-agent': USER_AGENT },
        body,
        dispatcher: this.agent,
        // undici follows no redirects unless told to.
        signal,
      });
      let excerpt = '';
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        if (excerpt.length < EXCERPT_BYTES) excerpt += chunk.toString('utf8');
      }
      const statusCode = response.statusCode;
      const ok = statusCode >= 200 && statusCode < 300;
      return {
        ok,
        statusCode,
        latencyMs: elapsed(),
        error: ok
          ? null
          : statusCode >= 300 && statusCode < 400
            ? `redirect (${statusCode}) not followed`
            : `HTTP ${statusCode}`,
        responseExcerpt: excerpt.slice(0, EXCERPT_BYTES),
        retryAfterMs:
          statusCode === 429 || statusCode === 503
            ? retryAfter(response.headers['retry-after'], Date.now())
            : null,
      };
    } catch (error) {
      const code = (error as { code?: string }).code;
      const message = signal.aborted
        ? `timed out after ${this.timeoutMs} ms`
        : error instanceof Error
          ? `${code === undefined ? '' : `${code}: `}${error.message}`
          : String(error);
      return failure(message);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
