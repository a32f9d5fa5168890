import type { Seller } from './books';
import { CLIENTS, sleep } from './run';

/** The fault matrix's load: client loops calling the seller's tool, and what they got. */

export type Outcome = 'served' | 'refused' | 'failed' | 'server_error';

export interface Load {
  counts: Record<Outcome, number>;
  /** Every loop has ended (stopped, or `maxCalls` made). */
  finished(): boolean;
  /** Longest run of failed calls, in seconds: what clients saw of the outage. */
  outageSeconds(): number;
  stop(): Promise<void>;
}

/** `CLIENTS` loops of one call each after the other until stopped (or `maxCalls`). */
export function load(call: () => Promise<Outcome>, maxCalls = 50_000): Load {
  const counts: Record<Outcome, number> = { served: 0, refused: 0, failed: 0, server_error: 0 };
  let stopped = false;
  let calls = 0;
  let failingSince: number | undefined;
  let longest = 0;
  let ended = 0;
  const loops = Array.from({ length: CLIENTS }, async () => {
    while (!stopped && calls < maxCalls) {
      calls++;
      const outcome = await call();
      counts[outcome]++;
      const now = Date.now();
      if (outcome === 'failed' || outcome === 'server_error') failingSince ??= now;
      else if (failingSince !== undefined) {
        longest = Math.max(longest, now - failingSince);
        failingSince = undefined;
      }
      // A failing call waits a little, so an outage does not spend the calls in a busy loop.
      if (outcome !== 'served') await sleep(outcome === 'refused' ? 20 : 100);
    }
    ended++;
  });
  return {
    counts,
    finished: () => ended === CLIENTS,
    outageSeconds: () => Math.max(longest, failingSince === undefined ? 0 : Date.now() - failingSince) / 1000,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

let rpcId = 0;
/** The last answer that was not a served call, for the log. */
let lastFailure = '';
/** The last answer that was not a served call. */
export const lastFailureSeen = () => lastFailure;
/** Every answer that was not a served call, for the log at the end. */
export const failures: string[] = [];
export function toolCall(s: Seller): () => Promise<Outcome> {
  return async () => {
    try {
      const response = await fetch(s.mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${s.token}`,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: ++rpcId,
          method: 'tools/call',
          params: { name: 'add', arguments: { a: 1, b: 2 } },
        }),
        signal: AbortSignal.timeout(10_000),
      });
      const text = await response.text();
      if (text.includes('"text":"3"')) return 'served';
      lastFailure = `${response.status} ${text.slice(0, 200)}`;
      failures.push(lastFailure);
      if (response.status >= 500) return response.status === 503 ? 'failed' : 'server_error';
      return text.includes('dev.mcp-meter/paywall') || text.includes('"error"') ? 'refused' : 'failed';
    } catch (error) {
      lastFailure = String(error);
      failures.push(`${lastFailure} (${(error as Error).cause ?? ''})`);
      return 'failed';
    }
  };
}
