/**
 * What a proxy's event loop and its Kafka producer thread (producer-thread.ts) say to each other.
 * Records cross as flat lists of strings, three per record (environment, partition key, JSON
 * text): strings are copied between threads as they are, with no object graph to walk.
 */

/** What the thread is started with. */
export interface ProducerThreadData {
  brokers: string[];
  clientId: string;
  namespace: string;
  /** kafkajs's INFO lines too (the parent's logger is at debug). */
  verbose: boolean;
}

export type ToProducerThread =
  /** Publish these records; answered `published` or `failed` with the same id. */
  | { type: 'publish'; id: number; entries: string[] }
  /** Finish what was sent, disconnect, answer `closed`. */
  | { type: 'close' };

export type FromProducerThread =
  | { type: 'ready' }
  | { type: 'start-failed'; error: string }
  | { type: 'published'; id: number }
  | { type: 'failed'; id: number; error: string }
  | { type: 'log'; level: 'warn' | 'debug'; extra: Record<string, unknown>; message: string }
  | { type: 'closed' };

/** Strings a record takes in a publish's `entries`. */
export const ENTRY_WIDTH = 3;
