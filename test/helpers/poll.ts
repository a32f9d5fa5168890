/**
 * What the stacks a test file runs add to every timed-out wait's message (their services' log
 * tails), so a wait that fails in CI says what the services saw; the returned function forgets it.
 */
const explainers = new Set<() => string>();
export function explainTimeouts(explain: () => string): () => void {
  explainers.add(explain);
  return () => explainers.delete(explain);
}

/** Polls until `check` returns a value, or fails with the last value seen; bounded in time. */
export async function pollUntil<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  options: {
    timeoutMs?: number;
    intervalMs?: number;
    what?: string;
    rethrow?: (error: unknown) => boolean;
  } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  let last: T | undefined;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      last = await read();
      if (done(last)) return last;
    } catch (error) {
      if (options.rethrow?.(error) === true) throw error;
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 200));
  }
  throw new Error(
    `timed out waiting for ${options.what ?? 'condition'}; last value ${JSON.stringify(last)}${lastError ? `, last error ${String(lastError)}` : ''}${[...explainers].map((explain) => `\n${explain()}`).join('')}`,
  );
}
