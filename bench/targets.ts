/**
 * The proxy bench's targets (bench/proxy.ts, which names them) and the process whose CPU is
 * "the hop" of each, shared by its measuring and reporting modules.
 */

export const TARGETS = ['B1', 'N', 'BP', 'BPn', 'B2', 'B3', 'B3m', 'A'] as const;
export type TargetName = (typeof TARGETS)[number];
/** The process whose CPU is "the proxy" of each target. */
export const PROXY_GROUP: Record<TargetName, string> = {
  B1: 'origin',
  N: 'nginx',
  BP: 'passthrough',
  BPn: 'passthrough-net',
  B2: 'proxy-b2',
  B3: 'proxy-b3',
  B3m: 'proxy-b3',
  A: 'all-in-one',
};

/** The targets that are our proxy, whose metrics page counts their tool calls by outcome. */
export const PROXY_TARGETS: ReadonlySet<TargetName> = new Set(['B2', 'B3', 'B3m', 'A']);

/**
 * The relay's process (bench/load/relay.c, F): a TCP hop with no HTTP work that only the latency
 * trials call, at the goal's rate; not a target of the throughput rounds.
 */
export const RELAY_GROUP = 'relay';

export const median = (values: number[]) => {
  const s = [...values].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : (s[Math.floor((s.length - 1) / 2)] as number);
};
