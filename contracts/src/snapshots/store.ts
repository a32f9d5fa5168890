import { Redis } from 'ioredis';
import { connectedWithin, redisRetryDelay } from '../kit/net';

/** Key-value store shared by the control plane (writer) and the proxies (readers). */
export interface SnapshotStore {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  /** Calls `listener` with each key written or deleted by any process, so caches can drop it. */
  onChange(listener: (key: string) => void): void;
  /**
   * Resolves true once the store answers, or false after `timeoutMs` (reads and writes fail
   * fast until it does): a writer waits for it before publishing at start.
   */
  ready(timeoutMs?: number): Promise<boolean>;
  close(): Promise<void>;
}

const CHANGES = 'mcpmeter:snapshot:changed';

/** All-in-one stand-in for Redis; only shared between services of one process. */
export class MemorySnapshotStore implements SnapshotStore {
  private readonly values = new Map<string, string>();
  private readonly listeners: Array<(key: string) => void> = [];
  async get(key: string) {
    return this.values.get(key);
  }
  async set(key: string, value: string) {
    this.values.set(key, value);
    for (const listener of this.listeners) listener(key);
  }
  async delete(key: string) {
    this.values.delete(key);
    for (const listener of this.listeners) listener(key);
  }
  async ready() {
    return true;
  }
  onChange(listener: (key: string) => void) {
    this.listeners.push(listener);
  }
  async close() {}
}

export class RedisSnapshotStore implements SnapshotStore {
  private subscriber: Redis | undefined;
  constructor(private readonly redis: Redis) {
    redis.on('error', () => undefined);
  }

  static connect(url: string): RedisSnapshotStore {
    // Commands fail fast while Redis is away (offline queue off) instead of piling up in memory;
    // ioredis keeps reconnecting in the background and the store recovers by itself.
    return new RedisSnapshotStore(
      new Redis(url, {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        lazyConnect: false,
        retryStrategy: redisRetryDelay,
      }),
    );
  }

  ready(timeoutMs = 5_000): Promise<boolean> {
    return connectedWithin(this.redis, timeoutMs);
  }
  async get(key: string) {
    return (await this.redis.get(key)) ?? undefined;
  }
  async set(key: string, value: string) {
    await this.redis.multi().set(key, value).publish(CHANGES, key).exec();
  }
  async delete(key: string) {
    await this.redis.multi().del(key).publish(CHANGES, key).exec();
  }
  /** A dedicated subscriber connection; after a reconnect, caches rely on their TTL for what was missed. */
  onChange(listener: (key: string) => void) {
    if (this.subscriber === undefined) {
      this.subscriber = this.redis.duplicate({ enableOfflineQueue: true });
      this.subscriber.on('error', () => undefined);
      void this.subscriber.subscribe(CHANGES).catch(() => undefined);
    }
    this.subscriber.on('message', (_channel: string, key: string) => listener(key));
  }
  async close() {
    this.subscriber?.disconnect();
    this.redis.disconnect();
  }
}

export function openSnapshotStore(redisUrl: string | undefined): SnapshotStore {
  return redisUrl === undefined ? new MemorySnapshotStore() : RedisSnapshotStore.connect(redisUrl);
}
