import { join, resolve } from 'node:path';
import type { EnvReader } from '../kit';

/**
 * Settings every service reads for usage: the data directory, the usage bus (Kafka, or the
 * in-process queue), and ClickHouse.
 */

/** A ClickHouse database name this service accepts (also in settings read before any client is made). */
export const DATABASE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

export interface BusConfig {
  /** Empty: the in-process queue stands in for Kafka (all-in-one mode). */
  kafkaBrokers: string[];
  kafkaClientId: string;
  kafkaConsumerGroup: string;
  kafkaTopicPartitions: number;
  kafkaSessionTimeoutMs: number;
  /**
   * Publishes go through a Kafka producer in a worker thread (ingest/src/producer-thread.ts), so
   * encoding and sending them never holds the event loop that serves calls.
   */
  kafkaProducerThread: boolean;
  namespace: string;
  batchSize: number;
  flushIntervalMs: number;
  retryDelayMs: number;
  fetchMinBytes: number;
  fetchMaxWaitMs: number;
}

export interface ClickHouseConfig {
  url: string | undefined;
  user: string | undefined;
  password: string | undefined;
  chdbPath: string;
  database: string;
  /**
   * The ClickHouse cluster (a name in the servers' remote_servers, with Keeper) the usage tables
   * are made on: replicated local tables and distributed tables over them. Unset: one server.
   */
  cluster?: string | undefined;
  /** How often ingest rebuilds the analytics rollups (docs/analytics.md); one server only. */
  rollupIntervalMs: number;
}

export function readDataDir(env: EnvReader): string {
  return resolve(env.string('DATA_DIR', './data'));
}

export function readBusConfig(env: EnvReader): BusConfig {
  const namespace = env.string('BUS_NAMESPACE', 'mcpmeter');
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(namespace)) {
    env.problem(`BUS_NAMESPACE: letters, digits, _ and - separated by dots, got "${namespace}"`);
  }
  const kafkaBrokers = env.list('KAFKA_BROKERS');
  return {
    kafkaBrokers,
    kafkaClientId: env.string('KAFKA_CLIENT_ID', 'mcp-meter'),
    kafkaConsumerGroup: env.string('KAFKA_CONSUMER_GROUP', `${namespace}-ingest`),
    // Partitions bound consumer parallelism; 6 lets a group grow to 6 members without a resize.
    kafkaTopicPartitions: env.int('KAFKA_TOPIC_PARTITIONS', 6, { min: 1, max: 1024 }),
    // How long a consumer that died silently keeps its partitions before the group moves them.
    // A consumer that died gives up its partitions after this long; a live one heartbeats every
    // tenth of it, also while a slow store holds a batch (every 3 s), so 10 s is safe and a
    // restart after a crash resumes ingest in about 10 s rather than 30.
    kafkaSessionTimeoutMs: env.int('KAFKA_SESSION_TIMEOUT_MS', 10_000, { min: 6_000, max: 300_000 }),
    kafkaProducerThread: env.bool('KAFKA_PRODUCER_THREAD', true),
    namespace,
    // Big enough that ClickHouse sees few large inserts, small enough to bound memory. The
    // in-process bus (all-in-one) writes what gathered during its linger in one insert only while
    // that is less than a batch: at a whole batch it writes at once, and what came after goes
    // alone a linger later, two inserts where one would do. Its batch is larger than one linger
    // carries at the all-in-one's maximum (about 25,000 calls/s: 7,000 records).
    batchSize: env.int('INGEST_BATCH_SIZE', kafkaBrokers.length === 0 ? 20_000 : 5_000, {
      min: 1,
      max: 1_000_000,
    }),
    // Usage becomes queryable within about this long after it is accepted. Each write is a
    // ClickHouse part to merge later: at 1,500 records/s, 1 s instead of 0.5 s cut the ingest
    // process's CPU for metering by about 40% (measured with `npm run bench:proxy`).
    flushIntervalMs: env.int('INGEST_FLUSH_INTERVAL_MS', 1000, { min: 10, max: 60_000 }),
    retryDelayMs: env.int('INGEST_RETRY_DELAY_MS', 500, { min: 10, max: 60_000 }),
    // A consumer fetch waits for this much data or INGEST_FETCH_MAX_WAIT_MS, whichever comes first:
    // fewer, fuller fetches cost the broker and the consumer far less per record, for at most the
    // wait in freshness. At 512 KiB fetches stay bound by the wait (four a second) up to about
    // 4,000 records/s; from 64 KiB it cut this process's CPU per metered call by about a fifth
    // holding the proxy bench at 2000 calls/s (measured with `npm run bench:proxy`).
    fetchMinBytes: env.int('INGEST_FETCH_MIN_BYTES', 512 * 1024, { min: 1, max: 64 * 1024 * 1024 }),
    fetchMaxWaitMs: env.int('INGEST_FETCH_MAX_WAIT_MS', 250, { min: 10, max: 10_000 }),
  };
}

export function readClickHouseConfig(env: EnvReader, dataDir: string): ClickHouseConfig {
  const database = env.string('CLICKHOUSE_DATABASE', 'mcpmeter');
  if (!DATABASE_NAME.test(database))
    env.problem(`CLICKHOUSE_DATABASE: not a valid identifier: "${database}"`);
  const url = env.url('CLICKHOUSE_URL', ['http', 'https']);
  const cluster = env.optionalString('CLICKHOUSE_CLUSTER');
  if (cluster !== undefined && !DATABASE_NAME.test(cluster))
    env.problem(`CLICKHOUSE_CLUSTER: not a valid cluster name: "${cluster}"`);
  if (cluster !== undefined && url === undefined)
    env.problem('CLICKHOUSE_CLUSTER: needs CLICKHOUSE_URL (embedded chdb is one server)');
  return {
    url,
    user: env.optionalString('CLICKHOUSE_USER'),
    password: env.optionalString('CLICKHOUSE_PASSWORD'),
    chdbPath: join(dataDir, 'clickhouse'),
    database,
    cluster,
    rollupIntervalMs: env.int('USAGE_ROLLUP_INTERVAL_MS', 30_000, { min: 1_000, max: 3_600_000 }),
  };
}
