import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from '@mcp-meter/contracts/kit';
import { partitionKey, recordJson, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import type { UsagePublisher } from './bus';
import {
  ENTRY_WIDTH,
  type FromProducerThread,
  type ProducerThreadData,
  type ToProducerThread,
} from './producer-thread-protocol';

export interface ProducerThreadOptions {
  brokers: string[];
  clientId: string;
  namespace: string;
  logger: Logger;
}

interface Pending {
  resolve: () => void;
  reject: (error: Error) => void;
}

/**
 * Publishes to Kafka from a worker thread. The Kafka client's work on a publish (grouping the
 * records into messages, encoding the produce request, its checksums, the socket, the answer)
 * ran on the proxy's event loop in one piece of about 1.4 ms each tenth of a second
 * (docs/performance.md), during which no call was read or answered; here the loop only hands
 * the thread each record's environment, partition key and JSON text (made once, for the spool).
 *
 * A publish resolves when the thread says the brokers acknowledged it, as
 * `KafkaUsagePublisher.publish` does. A thread that dies fails the publishes it held (the
 * emitter keeps their records and retries; they are still in its spool) and the next publish
 * starts a new one.
 */
export class ThreadedKafkaPublisher implements UsagePublisher {
  readonly sendsRecordJson = true;
  private thread: Worker | undefined;
  private starting: Promise<Worker> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private closing = false;
  private readonly kafkaLog: Logger;

  constructor(private readonly options: ProducerThreadOptions) {
    this.kafkaLog = options.logger.child({ component: 'kafkajs', thread: 'producer' });
  }

  /** Starts the thread and waits for its producer to connect; rejects as a failed connect would. */
  async connect(): Promise<void> {
    await this.started();
  }

  publish(records: readonly UsageRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    if (this.closing) return Promise.reject(new Error('the usage publisher is closed'));
    const entries: string[] = new Array(records.length * ENTRY_WIDTH);
    let i = 0;
    for (const record of records) {
      entries[i++] = record.environment;
      entries[i++] = partitionKey(record);
      entries[i++] = recordJson(record);
    }
    const thread = this.thread;
    if (thread !== undefined) return this.send(thread, entries);
    return this.started().then((started) => this.send(started, entries));
  }

  /** Lets what the thread holds finish, then stops it (after 15 s, whatever it holds). */
  async close(): Promise<void> {
    this.closing = true;
    const thread = this.thread ?? (await this.starting?.catch(() => undefined));
    if (thread === undefined) return;
    const exited = new Promise((resolve) => thread.once('exit', resolve));
    const deadline = setTimeout(() => void thread.terminate(), 15_000);
    this.post(thread, { type: 'close' });
    await exited;
    clearTimeout(deadline);
  }

  /** The thread's id (for a test that stops it the way a crash would); undefined when none runs. */
  get threadId(): number | undefined {
    return this.thread?.threadId;
  }

  /** Stops the thread at once, as a crash in it would: what it held fails. For tests. */
  async crashThread(): Promise<void> {
    await this.thread?.terminate();
  }

  private send(thread: Worker, entries: string[]): Promise<void> {
    return new Promise((resolve, reject) => {
      const id = ++this.nextId;
      this.pending.set(id, { resolve, reject });
      this.post(thread, { type: 'publish', id, entries });
    });
  }

  private post(thread: Worker, message: ToProducerThread): void {
    thread.postMessage(message);
  }

  private started(): Promise<Worker> {
    if (this.thread !== undefined) return Promise.resolve(this.thread);
    this.starting ??= this.start().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private start(): Promise<Worker> {
    const script = threadScript();
    const data: ProducerThreadData = {
      brokers: this.options.brokers,
      clientId: this.options.clientId,
      namespace: this.options.namespace,
      verbose: this.options.logger.isLevelEnabled('debug'),
    };
    const thread = new Worker(script, { workerData: data, execArgv: [] });
    return new Promise((resolve, reject) => {
      let ready = false;
      thread.on('message', (message: FromProducerThread) => {
        if (message.type === 'ready') {
          ready = true;
          this.thread = thread;
          resolve(thread);
        } else if (message.type === 'start-failed') {
          reject(new Error(message.error));
          void thread.terminate();
        } else this.received(thread, message);
      });
      thread.on('error', (error) => {
        if (!ready) reject(error);
        this.options.logger.error({ err: error }, 'the Kafka producer thread failed');
      });
      thread.on('exit', (code) => {
        if (!ready)
          reject(new Error(`the Kafka producer thread stopped before its producer connected (${code})`));
        this.exited(thread);
      });
    });
  }

  private received(thread: Worker, message: FromProducerThread): void {
    switch (message.type) {
      case 'published':
      case 'failed': {
        const pending = this.pending.get(message.id);
        if (pending === undefined) return;
        this.pending.delete(message.id);
        if (message.type === 'published') pending.resolve();
        else pending.reject(new Error(message.error));
        return;
      }
      case 'log':
        this.kafkaLog[message.level](message.extra, message.message);
        return;
      case 'closed':
        void thread.terminate();
        return;
      default:
        return;
    }
  }

  /** What the thread held when it stopped fails: its records are still the emitter's to retry. */
  private exited(thread: Worker): void {
    if (this.thread !== thread) return;
    this.thread = undefined;
    if (this.pending.size > 0 && !this.closing)
      this.options.logger.error(
        { publishes: this.pending.size },
        'the Kafka producer thread stopped with publishes unanswered; they will be retried',
      );
    const stopped = new Error('the Kafka producer thread stopped before the brokers answered');
    for (const pending of this.pending.values()) pending.reject(stopped);
    this.pending.clear();
  }
}

/**
 * The thread's script: beside this module when it runs from source (a bootstrap that registers
 * the TypeScript hooks in the thread), or the build's own entry beside the bundle's chunks
 * (deploy/build.mjs). `import.meta.filename` is where this code runs from; the build rewrites
 * `import.meta.url` to the source's location, so that cannot tell them apart.
 */
function threadScript(): string {
  const here = import.meta.filename;
  return join(
    dirname(here),
    here.endsWith('.ts') ? 'producer-thread-source.mjs' : 'kafka-producer-thread.js',
  );
}
