/**
 * Runs `attempt` until it resolves, waiting `delayMs(n)` after its n-th failure (each told to
 * `failed` first). Gives up, with undefined, once `stopped()` says the service is stopping: a
 * start that can fail for a while (the usage consumer, while Kafka still elects the leaders of
 * topics just created) is tried again rather than left failed until the next restart.
 */
export async function keepTrying<T>(
  attempt: () => Promise<T>,
  options: {
    delayMs: (failures: number) => number;
    stopped: () => boolean;
    failed: (error: unknown, failures: number) => Promise<void> | void;
  },
): Promise<T | undefined> {
  for (let failures = 0; !options.stopped(); ) {
    try {
      return await attempt();
    } catch (error) {
      failures++;
      await options.failed(error, failures);
      if (options.stopped()) break;
      await new Promise((resolve) => setTimeout(resolve, options.delayMs(failures)));
    }
  }
  return undefined;
}

/** Half a second after the first failure, doubling, at most 30 s. */
export const backoffMs = (failures: number): number => Math.min(30_000, 500 * 2 ** (failures - 1));
