/**
 * Proxy workers on embedded defaults (issue 65). With no Redis and no Kafka, the limit counters,
 * the snapshots and the usage bus live in the memory of the all-in-one process (beside the
 * control plane, ingest and chdb), and its proxy workers reach them over their IPC channel: a
 * worker's limiter leases from the one counter store, its caches hear of every snapshot change,
 * and its emitter publishes to the one in-process bus, whose publish still resolves only once the
 * records are stored, so a worker's spool keeps them until then as it would for Kafka.
 *
 * The channel carries few messages: a lease covers many calls, snapshots are cached, and usage
 * goes in batches. A call whose answer does not come within CALL_TIMEOUT_MS, or is cut off by the
 * supervisor's exit, fails like a store that went away: the limiter and the emitter already
 * handle that (a worker then drains and stops, see serve.ts).
 */
import type { ChildProcess } from 'node:child_process';
import type { CounterStore, LeaseCall, LeaseReply } from '@mcp-meter/contracts/limits';
import type { SnapshotStore } from '@mcp-meter/contracts/snapshots';
import type { UsagePublisher } from '@mcp-meter/contracts/usage';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';

/** What the supervisor shares with its workers. */
export interface SharedStores {
  snapshots: SnapshotStore;
  counters: CounterStore;
  publisher: UsagePublisher;
}

/** The worker's environment flag: its stores are its supervisor's, over the IPC channel. */
export const SUPERVISOR_STORES_ENV = 'PROXY_STORES';
export const SUPERVISOR_STORES = 'supervisor';

const CALL_TIMEOUT_MS = 15_000;

type Operation =
  | 'hello'
  | 'lease'
  | 'settleMany'
  | 'seed'
  | 'report'
  | 'putHold'
  | 'takeHold'
  | 'get'
  | 'set'
  | 'delete'
  | 'publish';

type Message =
  | { mcpmeter: 'call'; id: number; op: Operation; args: unknown[] }
  | { mcpmeter: 'reply'; id: number; value?: unknown; error?: string }
  | { mcpmeter: 'changed'; key: string };

const isMessage = (m: unknown): m is Message =>
  typeof m === 'object' && m !== null && typeof (m as { mcpmeter?: unknown }).mcpmeter === 'string';

/** What a worker learns first: how the bus takes batches (the emitter sizes its batches by it). */
interface Hello {
  wholeBatch: number | undefined;
}

/**
 * The supervisor's side: answers its workers' calls on this process's stores, and tells every
 * connected worker of each snapshot change (one listener for all: the store has no way to remove one).
 */
export function shareStores(stores: SharedStores): { serve(child: ChildProcess): void } {
  const children = new Set<ChildProcess>();
  stores.snapshots.onChange((key) => {
    for (const child of children)
      if (child.connected) child.send({ mcpmeter: 'changed', key } satisfies Message, () => undefined);
  });
  const run = (op: Operation, args: unknown[]): Promise<unknown> => {
    const { counters, snapshots, publisher } = stores;
    switch (op) {
      case 'hello':
        return Promise.resolve({ wholeBatch: publisher.wholeBatch } satisfies Hello);
      case 'lease':
        return counters.lease(args[0] as LeaseCall);
      case 'settleMany':
        return counters.settleMany(args[0] as LeaseCall[]);
      case 'seed':
        return counters.seed(args[0] as string, args[1] as number, args[2] as number);
      case 'report':
        return counters.report(args[0] as string, args[1] as number);
      case 'putHold':
        return counters.putHold(args[0] as string, args[1] as string, args[2] as number);
      case 'takeHold':
        return counters.takeHold(args[0] as string);
      case 'get':
        return snapshots.get(args[0] as string);
      case 'set':
        return snapshots.set(args[0] as string, args[1] as string);
      case 'delete':
        return snapshots.delete(args[0] as string);
      case 'publish':
        return publisher.publish(args[0] as UsageRecord[]);
    }
  };
  return {
    serve(child) {
      children.add(child);
      child.once('exit', () => children.delete(child));
      child.on('message', (message: unknown) => {
        if (!isMessage(message) || message.mcpmeter !== 'call') return;
        const { id } = message;
        const answer = (reply: Message) => {
          if (child.connected) child.send(reply, () => undefined);
        };
        run(message.op, Array.isArray(message.args) ? message.args : []).then(
          (value) => answer({ mcpmeter: 'reply', id, value }),
          (error: unknown) =>
            answer({ mcpmeter: 'reply', id, error: error instanceof Error ? error.message : String(error) }),
        );
      });
    },
  };
}

/** The worker's side: stores that are its supervisor's, reached over this process's IPC channel. */
export async function supervisorStores(): Promise<SharedStores> {
  const channel = process;
  if (channel.send === undefined) throw new Error(`${SUPERVISOR_STORES_ENV}=supervisor needs an IPC channel`);
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const listeners: Array<(key: string) => void> = [];
  let next = 0;
  let gone = false;
  channel.on('message', (message: unknown) => {
    if (!isMessage(message)) return;
    if (message.mcpmeter === 'changed') for (const listener of listeners) listener(message.key);
    if (message.mcpmeter !== 'reply') return;
    const waiting = pending.get(message.id);
    if (waiting === undefined) return;
    pending.delete(message.id);
    if (message.error === undefined) waiting.resolve(message.value);
    else waiting.reject(new Error(`the supervisor's store: ${message.error}`));
  });
  channel.once('disconnect', () => {
    gone = true;
    for (const waiting of pending.values()) waiting.reject(new Error('the supervisor is gone'));
    pending.clear();
  });
  const call = <T>(op: Operation, ...args: unknown[]): Promise<T> => {
    if (gone) return Promise.reject(new Error('the supervisor is gone'));
    const id = ++next;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`the supervisor did not answer ${op} in time`));
      }, CALL_TIMEOUT_MS);
      timer.unref();
      pending.set(id, {
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value as T);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      channel.send?.({ mcpmeter: 'call', id, op, args } satisfies Message, undefined, undefined, (error) => {
        if (error === null || !pending.has(id)) return;
        pending.delete(id);
        clearTimeout(timer);
        reject(error);
      });
    });
  };
  const hello = await call<Hello>('hello');
  let commands = 0;
  /** A store command: counted here, as the Redis store counts what it sends. */
  const command = <T>(n: number, op: Operation, ...args: unknown[]): Promise<T> => {
    commands += n;
    return call<T>(op, ...args);
  };
  const counters: CounterStore = {
    get commands() {
      return commands;
    },
    lease: (c) => command<LeaseReply>(1, 'lease', c),
    settleMany: (c) => command<void>(c.length, 'settleMany', c),
    seed: (key, used, expiresAtMs) => command<void>(1, 'seed', key, used, expiresAtMs),
    report: (key, units) => command<void>(1, 'report', key, units),
    putHold: (key, value, ttlMs) => command<void>(1, 'putHold', key, value, ttlMs),
    // undefined does not cross the channel (JSON): an absent value comes back as none at all.
    takeHold: async (key) => (await command<string | null>(1, 'takeHold', key)) ?? undefined,
    close: async () => {},
  };
  const snapshots: SnapshotStore = {
    get: async (key) => (await call<string | null>('get', key)) ?? undefined,
    set: (key, value) => call<void>('set', key, value),
    delete: (key) => call<void>('delete', key),
    onChange: (listener) => void listeners.push(listener),
    ready: async () => !gone,
    close: async () => {},
  };
  const publisher: UsagePublisher = {
    publish: (records) => call<void>('publish', records),
    close: async () => {},
    get unreachable() {
      return gone;
    },
    ...(hello.wholeBatch === undefined ? {} : { wholeBatch: hello.wholeBatch }),
  };
  return { snapshots, counters, publisher };
}
