import { createServer } from 'node:net';

/** Ports this process has handed out: the OS may offer a just-closed one again. */
const handedOut = new Set<number>();

/**
 * A free loopback port, never one this process was given before: the OS can offer the same
 * closed port to two calls in a row (it once gave Redis and the Kafka controller the same one).
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await pickPort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

/** Asks the kernel for an unused loopback port. */
function pickPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port assigned'));
      });
    });
  });
}

/** Whether a process with this id exists (one owned by another user counts: EPERM). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === 'EPERM';
  }
}

/** A client that reports `ready` once connected (an ioredis connection). */
interface Connecting {
  status: string;
  once(event: 'ready', listener: () => void): unknown;
  off(event: 'ready', listener: () => void): unknown;
}

/** Resolves true once `client` is connected, or false after `timeoutMs` (it keeps trying). */
export function connectedWithin(client: Connecting, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const ready = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      client.off('ready', ready);
      resolve(false);
    }, timeoutMs);
    client.once('ready', ready);
  });
}

/**
 * How soon a Redis client dials again after losing its server: 50 ms more each try, never more
 * than 200 ms apart, so calls are admitted again within a fifth of a second of Redis answering
 * (ioredis's default waits up to 2 s between tries: 1.8–2.8 s of refused calls after an outage,
 * issue 58). A try is one loopback or LAN connect: cheap at five a second.
 */
export const redisRetryDelay = (times: number): number => Math.min(times * 50, 200);
