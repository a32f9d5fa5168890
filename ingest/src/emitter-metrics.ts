import { counter, gauge } from '@mcp-meter/contracts/metrics';
import type { EmitterStats } from './emitter';

/**
 * A usage emitter's counters as Prometheus families: the proxy's (each worker's) and the control
 * plane's limit check's. Their names are the same in both services, so one alert rule covers
 * every emitter; the scrape's target tells them apart.
 */
export function usageEmitterMetrics(stats: EmitterStats): string[] {
  return [
    counter('mcpmeter_usage_emitted_total', 'Usage records emitted', stats.emitted),
    counter(
      'mcpmeter_usage_published_total',
      'Usage records acknowledged by the bus from the memory queue (spilled ones count as replayed)',
      stats.published,
    ),
    counter(
      'mcpmeter_usage_retried_total',
      'Usage records whose publish failed and was retried',
      stats.retried,
    ),
    counter('mcpmeter_usage_spilled_total', 'Usage records written to the local spill file', stats.spilled),
    counter(
      'mcpmeter_usage_spilled_on_loop_total',
      'Of the spilled usage records, those written on the event loop because the disk was behind',
      stats.spilledOnLoop,
    ),
    counter(
      'mcpmeter_usage_replayed_total',
      'Spilled usage records acknowledged by the bus once it took records again',
      stats.replayed,
    ),
    counter(
      'mcpmeter_usage_dropped_total',
      'Usage records lost (no spill directory, or the disk failed)',
      stats.dropped,
    ),
    counter(
      'mcpmeter_usage_spooled_total',
      'Usage records written to the write-ahead spool before their answers ended',
      stats.spooled,
    ),
    counter(
      'mcpmeter_usage_spool_failures_total',
      'Spool writes that failed (the records stayed in memory only)',
      stats.spoolFailures,
    ),
    gauge('mcpmeter_usage_emitter_queue_depth', 'Records waiting in memory', stats.queued),
    gauge(
      'mcpmeter_usage_spilling_chars',
      'Characters of spill text in writes not yet on disk (the disk is behind when it nears its bound)',
      stats.spilling,
    ),
  ];
}
