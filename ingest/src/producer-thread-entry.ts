import { parentPort, workerData } from 'node:worker_threads';
import { ENVIRONMENTS, type Environment } from '@mcp-meter/contracts/usage-record';
import { type BusEntry, KafkaUsagePublisher, kafkaClient, kafkaLogOptions } from './kafka-bus';
import {
  ENTRY_WIDTH,
  type FromProducerThread,
  type ProducerThreadData,
  type ToProducerThread,
} from './producer-thread-protocol';

/**
 * The Kafka producer thread's own code (started by producer-thread.ts): one `KafkaUsagePublisher`,
 * which encodes and sends the produce requests here, off the event loop that serves calls.
 */

const port = parentPort;
if (port === null) throw new Error('producer-thread-entry runs as a worker thread');
const data = workerData as ProducerThreadData;

const send = (message: FromProducerThread): void => port.postMessage(message);
const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error));

const kafka = kafkaClient(
  data.brokers,
  data.clientId,
  kafkaLogOptions({
    verbose: data.verbose,
    write(level, extra, message) {
      try {
        send({ type: 'log', level, extra, message });
      } catch {
        // A field the structured clone cannot copy (a function): the line goes without its fields.
        send({ type: 'log', level, extra: { fields: Object.keys(extra) }, message });
      }
    },
  }),
);
const publisher = new KafkaUsagePublisher(kafka, data.namespace);

const isEnvironment = (value: string | undefined): value is Environment =>
  ENVIRONMENTS.includes(value as Environment);

/** The records a publish's flat list of strings names. */
function entriesOf(flat: readonly string[]): BusEntry[] {
  const entries: BusEntry[] = [];
  for (let i = 0; i + ENTRY_WIDTH <= flat.length; i += ENTRY_WIDTH) {
    const environment = flat[i];
    const key = flat[i + 1];
    const json = flat[i + 2];
    if (!isEnvironment(environment) || key === undefined || json === undefined)
      throw new Error(`publish entry ${i / ENTRY_WIDTH} is not an environment, key and text`);
    entries.push({ environment, key, json });
  }
  return entries;
}

port.on('message', (message: ToProducerThread) => {
  if (message.type === 'publish') {
    let entries: BusEntry[];
    try {
      entries = entriesOf(message.entries);
    } catch (error) {
      send({ type: 'failed', id: message.id, error: describe(error) });
      return;
    }
    publisher.publishEntries(entries).then(
      () => send({ type: 'published', id: message.id }),
      (error: unknown) => send({ type: 'failed', id: message.id, error: describe(error) }),
    );
  } else if (message.type === 'close') {
    publisher.close().then(
      () => send({ type: 'closed' }),
      () => send({ type: 'closed' }),
    );
  }
});

publisher.connect().then(
  () => send({ type: 'ready' }),
  (error: unknown) => send({ type: 'start-failed', error: describe(error) }),
);
