import { createRequire } from 'node:module';

/**
 * kafkajs 2.2.4 keeps every broker connection's request queue on a 1 ms timer for as long as the
 * connection lives, pending requests or not (tulios/kafkajs#1556, #1704; fix proposed in #1667,
 * unreleased): `scheduleCheckPendingRequests` computes `throttledUntil - Date.now()`, which is
 * negative when nothing is throttled, and arms `setTimeout` with it anyway; the check then
 * re-arms itself. An ingest consumer so woke about 900 times a second, idle or not: about 4% of
 * a core doing nothing (measured with strace and /proc; idle proxies were not seen looping).
 *
 * This replaces the method with the intended behaviour: a timer only while requests are waiting
 * (client-side throttling, or the in-flight limit), at the end of the throttle or after 10 ms.
 * Requests not waiting need no timer: `push` sends them at once, and a fulfilled request
 * re-checks the queue itself. Applied once, at import, before any connection exists.
 */

interface RequestQueueInternals {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

/** kafkajs's own interval for re-checking a queue that waits on the in-flight limit. */
const CHECK_PENDING_REQUESTS_INTERVAL_MS = 10;

const require = createRequire(import.meta.url);
const RequestQueue: {
  prototype: RequestQueueInternals;
} = require('kafkajs/src/network/requestQueue/index.js');

export function scheduleCheckPendingRequests(this: RequestQueueInternals): void {
  if (this.throttleCheckTimeoutId || this.pending.length === 0) return;
  const untilUnthrottled = this.throttledUntil - Date.now();
  this.throttleCheckTimeoutId = setTimeout(
    () => {
      this.throttleCheckTimeoutId = null;
      this.checkPendingRequests();
    },
    untilUnthrottled > 0 ? untilUnthrottled : CHECK_PENDING_REQUESTS_INTERVAL_MS,
  );
}

RequestQueue.prototype.scheduleCheckPendingRequests = scheduleCheckPendingRequests;

export { RequestQueue };
