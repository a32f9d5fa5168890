import { Redis } from 'ioredis';

/** Key-value store shared by the control plane (writer) and the proxies (readers). */
export interface SnapshotStore {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  close(): Promise<void>;
}

/** All-in-one stand-in for Redis; only shared between services of one process. */
export class MemorySnapshotStore implements SnapshotStore {
  private readonly values = new Map<string, string>();
  async get(key: string) {
    return this.values.get(key);
  }
  async set(key: string, value: string) {
    this.values.set(key, value);
  }
  async delete(key: string) {
    this.values.delete(key);
  }
  async close() {}
}

export class RedisSnapshotStore implements SnapshotStore {
  constructor(private readonly redis: Redis) {}

  static connect(url: string): RedisSnapshotStore {
    // Commands fail fast while Redis is away (offline queue off) instead of piling up in memory;
    // ioredis keeps reconnecting in the background and the store recovers by itself.
    return new RedisSnapshotStore(
      new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: false }),
    );
  }

  async get(key: string) {
    return (await this.redis.get(key)) ?? undefined;
  }
  async set(key: string, value: string) {
    await this.redis.set(key, value);
  }
  async delete(key: string) {
    await this.redis.del(key);
  }
  async close() {
    this.redis.disconnect();
  }
}

export function openSnapshotStore(redisUrl: string | undefined): SnapshotStore {
  return redisUrl === undefined ? new MemorySnapshotStore() : RedisSnapshotStore.connect(redisUrl);
}
