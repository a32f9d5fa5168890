/**
 * One metrics page for all proxy workers (issue 65). The workers share one port, so a scrape
 * reaches whichever the kernel picks; a page of that worker alone would make every counter jump
 * between workers from one scrape to the next. So the worker a scrape reaches asks its
 * supervisor for its siblings' pages, over the IPC channel, and answers every worker's series,
 * each labelled with its worker (proxy/src/metrics-page.ts, `mergePages`). A sibling that does
 * not answer within PAGE_TIMEOUT_MS (starting, stopping, stalled) is left out of that scrape.
 */
import type { ChildProcess } from 'node:child_process';

const PAGE_TIMEOUT_MS = 1_000;
/** Numbers the supervisor's asks, across workers: a sibling's answer names the ask it answers. */
let nextAsk = 0;

type Message =
  /** Worker → supervisor: the siblings' pages, please. */
  | { mcpmeter: 'metric-pages'; id: number }
  /** Supervisor → worker: your page, please; worker → supervisor: here it is. */
  | { mcpmeter: 'metric-page'; id: number; page?: string }
  /** Supervisor → worker: the siblings' pages. */
  | { mcpmeter: 'metric-pages-reply'; id: number; pages: string[] };

const isMessage = (m: unknown): m is Message =>
  typeof m === 'object' &&
  m !== null &&
  typeof (m as { mcpmeter?: unknown }).mcpmeter === 'string' &&
  (m as { mcpmeter: string }).mcpmeter.startsWith('metric-') &&
  typeof (m as { id?: unknown }).id === 'number';

/** The supervisor's side: answers `child`'s asks with the pages of the other live workers. */
export function relayMetricPages(child: ChildProcess, siblings: () => readonly ChildProcess[]): void {
  const pageOf = (sibling: ChildProcess): Promise<string | undefined> =>
    new Promise((resolve) => {
      const id = nextAsk++;
      const timer = setTimeout(() => finish(undefined), PAGE_TIMEOUT_MS);
      const finish = (page: string | undefined) => {
        clearTimeout(timer);
        sibling.off('message', onMessage);
        resolve(page);
      };
      const onMessage = (message: unknown) => {
        if (isMessage(message) && message.mcpmeter === 'metric-page' && message.id === id)
          finish(typeof message.page === 'string' ? message.page : undefined);
      };
      sibling.on('message', onMessage);
      sibling.send({ mcpmeter: 'metric-page', id } satisfies Message, (error) => {
        if (error !== null) finish(undefined);
      });
    });
  child.on('message', (message: unknown) => {
    if (!isMessage(message) || message.mcpmeter !== 'metric-pages') return;
    const others = siblings().filter((s) => s !== child && s.connected);
    void Promise.all(others.map(pageOf)).then((pages) => {
      if (!child.connected) return;
      const reply: Message = {
        mcpmeter: 'metric-pages-reply',
        id: message.id,
        pages: pages.filter((p): p is string => p !== undefined),
      };
      child.send(reply, () => undefined);
    });
  });
}

/**
 * The worker's side: answers the supervisor's asks for this worker's page with `render`, and
 * returns how to get the siblings' pages (none when the supervisor does not answer in time).
 */
export function workerMetricPages(render: () => string): () => Promise<string[]> {
  const channel = process;
  const pending = new Map<number, (pages: string[]) => void>();
  let next = 0;
  channel.on('message', (message: unknown) => {
    if (!isMessage(message)) return;
    if (message.mcpmeter === 'metric-page' && message.page === undefined && channel.connected)
      channel.send?.(
        { mcpmeter: 'metric-page', id: message.id, page: render() } satisfies Message,
        undefined,
        undefined,
        () => undefined,
      );
    if (message.mcpmeter === 'metric-pages-reply') {
      pending.get(message.id)?.(Array.isArray(message.pages) ? message.pages : []);
      pending.delete(message.id);
    }
  });
  return () =>
    new Promise((resolve) => {
      if (channel.send === undefined || !channel.connected) return resolve([]);
      const id = next++;
      const timer = setTimeout(() => {
        pending.delete(id);
        resolve([]);
      }, PAGE_TIMEOUT_MS * 2);
      pending.set(id, (pages) => {
        clearTimeout(timer);
        resolve(pages);
      });
      // A channel closing meanwhile only leaves the siblings out (the timer answers).
      channel.send({ mcpmeter: 'metric-pages', id } satisfies Message, undefined, undefined, () => undefined);
    });
}
