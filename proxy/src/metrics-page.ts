import { sameSecret } from '@mcp-meter/contracts/kit';
import type { LeasedLimiter } from '@mcp-meter/contracts/limits';
import { Counter, counter, EventLoopDelay, GcPauses, gauge, Histogram } from '@mcp-meter/contracts/metrics';
import { type UsageEmitter, usageEmitterMetrics } from '@mcp-meter/ingest/producer';
import type { ControlPlaneLink } from './control-link';
import type { ServerDirectory } from './directory';
import type { Gatekeeper } from './gatekeeper';
import { type Exchange, respond } from './http-io';
import { refuse } from './refusals';

/** What the metrics page reads besides the proxy's own counters. */
export interface MetricSources {
  gatekeeper: Gatekeeper | undefined;
  limiter: LeasedLimiter | undefined;
  directory: ServerDirectory;
  link: ControlPlaneLink | undefined;
  emitter: UsageEmitter | undefined;
  /** Requests being served now. */
  inflight: number;
}

/** The proxy's Prometheus page (GET /metrics): its own counters and what its parts count. */
export class ProxyMetrics {
  /** Every answer waits while the event loop is blocked, so its delay is the proxy's latency floor. */
  private readonly loopDelay = new EventLoopDelay('mcpmeter_proxy_event_loop_delay_seconds');
  /** What blocks the loop most often under load: the collector's pauses. */
  private readonly gcPauses = new GcPauses('mcpmeter_proxy_gc');
  readonly requests = new Counter(
    'mcpmeter_proxy_http_requests_total',
    'HTTP requests answered (by the origin or by the proxy), by status code',
  );
  readonly toolCalls = new Counter('mcpmeter_proxy_tool_calls_total', 'tools/call requests, by outcome');
  /** Origins that failed their requests, by how: `origin_busy` is an origin slower than its traffic. */
  readonly originFailures = new Counter(
    'mcpmeter_proxy_origin_failures_total',
    'Requests the proxy answered itself because their origin failed, by refusal code (origin_busy: no connection to the origin came free within the queue bound or time)',
  );
  readonly own = new Histogram(
    'mcpmeter_proxy_own_seconds',
    "The proxy's own time per forwarded request: arrival to the origin request (auth, gating, limits)",
  );
  readonly origin = new Histogram(
    'mcpmeter_proxy_origin_seconds',
    'Origin time per forwarded request: origin request to the end of its answer',
  );
  readonly answer = new Histogram(
    'mcpmeter_proxy_answer_seconds',
    "The proxy's time per forwarded request after its origin answered: the end of the origin's answer to the end of the client's (refused calls' answers, metering, the spool write)",
  );
  /**
   * What the proxy adds to a call its origin answered, the SLI an SLO on the proxy reads: own and
   * answer time of one request together (two histograms' quantiles do not add up).
   */
  readonly added = new Histogram(
    'mcpmeter_proxy_added_seconds',
    "The proxy's time per request its origin answered, the origin's time left out: own time and answer time together",
  );

  render(sources: MetricSources): string {
    const { gatekeeper, limiter, directory, link, emitter } = sources;
    const parts = [
      this.requests.render(),
      this.toolCalls.render(),
      this.originFailures.render(),
      this.own.render(),
      this.origin.render(),
      this.answer.render(),
      this.added.render(),
    ];
    if (gatekeeper !== undefined) {
      const decisions = new Counter(
        'mcpmeter_proxy_limit_decisions_total',
        'Gating and limit decisions per tool call',
      );
      for (const [decision, value] of Object.entries(gatekeeper.stats.decisions))
        decisions.inc({ decision }, value);
      parts.push(
        decisions.render(),
        gauge(
          'mcpmeter_proxy_limit_grace_unreported',
          'Calls admitted in outage grace (limit store unreachable) not yet added to their counter',
          gatekeeper.stats.graceUnreported,
        ),
      );
    }
    if (limiter !== undefined) {
      parts.push(
        counter(
          'mcpmeter_proxy_limit_store_commands_total',
          'Commands sent to the limit store (Redis)',
          limiter.storeCommands,
        ),
        counter('mcpmeter_proxy_limit_leases_total', 'Leases taken from the limit store', limiter.leases),
        counter(
          'mcpmeter_proxy_limit_store_waits_total',
          'Limit checks that had no lease in hand and waited for the limit store',
          limiter.waits,
        ),
      );
    }
    parts.push(
      counter(
        'mcpmeter_proxy_snapshot_reads_total',
        'Snapshot store (Redis) reads for servers',
        directory.reads,
      ),
    );
    if (link !== undefined)
      parts.push(
        counter(
          'mcpmeter_proxy_control_plane_requests_total',
          'Paywall and seed calls to the control plane',
          link.requests,
        ),
      );
    const stats = emitter?.stats();
    if (stats !== undefined) parts.push(...usageEmitterMetrics(stats));
    parts.push(gauge('mcpmeter_proxy_inflight_requests', 'Requests being served', sources.inflight));
    parts.push(this.loopDelay.render(), this.gcPauses.render());
    return parts.join('');
  }

  close(): void {
    this.loopDelay.close();
    this.gcPauses.close();
  }
}

/** `GET /metrics`, behind `PROXY_METRICS_TOKEN` when one is set. */
export function serveMetrics(
  exchange: Exchange,
  authorization: string,
  expected: string | undefined,
  render: () => string | Promise<string>,
): void {
  if (expected !== undefined && !sameSecret(authorization, expected)) {
    refuse(exchange, 'metrics_unauthorized');
    return;
  }
  const page = render();
  if (typeof page === 'string') respond(exchange, 200, PAGE_TYPE, page);
  // A worker's page waits for its siblings' (respond does nothing for a client gone meanwhile).
  else void page.then((text) => respond(exchange, 200, PAGE_TYPE, text));
}

const PAGE_TYPE = 'text/plain; version=0.0.4';

/** A page's samples with `worker="n"` first among their labels. */
export function labelWorker(page: string, worker: number): string {
  const label = `worker="${worker}"`;
  return page
    .split('\n')
    .map((line) => {
      if (line === '' || line.startsWith('#')) return line;
      const space = line.indexOf(' ');
      const brace = line.indexOf('{');
      if (brace !== -1 && brace < space)
        return `${line.slice(0, brace + 1)}${label},${line.slice(brace + 1)}`;
      return `${line.slice(0, space)}{${label}}${line.slice(space)}`;
    })
    .join('\n');
}

/**
 * Workers' pages as one: each metric family once (its HELP and TYPE from the first page that has
 * it), with every page's samples of it, as the text format wants a family's lines together.
 */
export function mergePages(pages: readonly string[]): string {
  const families = new Map<string, { comments: string[]; samples: string[] }>();
  for (const page of pages) {
    let family: { comments: string[]; samples: string[] } | undefined;
    for (const line of page.split('\n')) {
      if (line === '') continue;
      const comment = /^# (HELP|TYPE) (\S+)/.exec(line);
      const name = comment?.[2] ?? line.slice(0, line.search(/[{ ]/));
      if (comment !== null || family === undefined) {
        family = families.get(name);
        if (family === undefined) {
          family = { comments: [], samples: [] };
          families.set(name, family);
        }
        // The first page's HELP and TYPE only.
        if (comment !== null) {
          if (!family.comments.some((c) => c.startsWith(`# ${comment[1]} `))) family.comments.push(line);
          continue;
        }
      }
      family.samples.push(line);
    }
  }
  let out = '';
  for (const { comments, samples } of families.values()) out += `${[...comments, ...samples].join('\n')}\n`;
  return out;
}
