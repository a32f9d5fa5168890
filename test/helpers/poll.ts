/** Polls until `check` returns a value, or fails with the last value seen; bounded in time. */
export async function pollUntil<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  options: {
    timeoutMs?: number;
    intervalMs?: number;
    what?: string;
    rethrow?: (error: unknown) => boolean;
    /** What else to say when the wait times out (a stack's log tail). */
    explain?: () => string;
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
    `timed out waiting for ${options.what ?? 'condition'}; last value ${JSON.stringify(last)}${lastError ? `, last error ${String(lastError)}` : ''}${options.explain === undefined ? '' : `\n${options.explain()}`}`,
  );
}
