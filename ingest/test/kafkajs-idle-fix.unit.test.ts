import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import '../src/kafka-bus';
import { RequestQueue, scheduleCheckPendingRequests } from '../src/kafkajs-idle-fix';

// Unit tests of the patched kafkajs request queue on a fake clock; the bus tests run it against
// the real broker.

interface Queue {
  pending: unknown[];
  inflight: Map<number, unknown>;
  throttleCheckTimeoutId: unknown;
  push(request: { entry: object; expectResponse: boolean; sendRequest: () => void }): void;
  fulfillRequest(response: { correlationId: number; payload: Buffer | null; size: number }): void;
  checkPendingRequests(): void;
  maybeThrottle(ms: number): void;
  destroy(): void;
}

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const newQueue = (maxInFlightRequests: number | null = null): Queue =>
  new (RequestQueue as unknown as new (options: object) => Queue)({
    maxInFlightRequests,
    requestTimeout: 30_000,
    enforceRequestTimeout: false,
    clientId: 'test',
    broker: '127.0.0.1:9092',
    logger: silent,
  });

function request(queue: Queue, correlationId: number, sent: number[]) {
  queue.push({
    entry: { correlationId, apiName: 'Fetch', apiKey: 1, apiVersion: 11, resolve() {}, reject() {} },
    expectResponse: true,
    sendRequest: () => sent.push(correlationId),
  });
}

describe('kafkajs request queue (idle-timer fix)', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('is installed by importing the Kafka bus', () => {
    expect(RequestQueue.prototype.scheduleCheckPendingRequests).toBe(scheduleCheckPendingRequests);
  });

  it('arms no timer when nothing waits (kafkajs 2.2.4 re-armed a 1 ms timer forever)', () => {
    const queue = newQueue();
    const sent: number[] = [];
    request(queue, 1, sent);
    queue.fulfillRequest({ correlationId: 1, payload: null, size: 0 });
    queue.checkPendingRequests();
    expect(sent).toEqual([1]);
    expect(queue.throttleCheckTimeoutId).toBeNull();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('sends a request held by client-side throttling when the throttle ends', () => {
    const queue = newQueue();
    const sent: number[] = [];
    queue.maybeThrottle(50);
    request(queue, 1, sent);
    expect(sent).toEqual([]);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(49);
    expect(sent).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual([1]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('sends a request held by the in-flight limit once an earlier one is answered', () => {
    const queue = newQueue(1);
    const sent: number[] = [];
    request(queue, 1, sent);
    request(queue, 2, sent);
    expect(sent).toEqual([1]);
    queue.fulfillRequest({ correlationId: 1, payload: null, size: 0 });
    expect(sent).toEqual([1, 2]);
    queue.fulfillRequest({ correlationId: 2, payload: null, size: 0 });
    vi.advanceTimersByTime(100);
    expect(queue.pending).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
    queue.destroy();
  });
});
