/**
 * Origin latency as analytics keeps it: a histogram of log buckets, so a slot's latencies fold
 * into a few hundred counters whatever the number of calls, and percentiles over any range merge
 * the slots' histograms. Bucket k holds the latencies in (γ^(k-1), γ^k] ms; its representative
 * value 2γ^k / (γ + 1) is within ACCURACY of every latency in it (the DDSketch construction).
 * The raw records and the rollups are bucketed by the same SQL, so both answer alike.
 */

/** Every percentile is within 1 % of the latency at that rank. */
export const LATENCY_ACCURACY = 0.01;
const GAMMA = (1 + LATENCY_ACCURACY) / (1 - LATENCY_ACCURACY);
/** Latencies under a microsecond (the proxy records microseconds) land here and read as 0. */
export const ZERO_BUCKET = -100_000;
const SMALLEST_MS = 0.001;

/** The bucket of a latency given as a SQL expression in milliseconds (Int32, for Map(Int32, UInt64)). */
export function latencyBucketSql(latencyMs: string): string {
  return `if(${latencyMs} < ${SMALLEST_MS}, ${ZERO_BUCKET}, toInt32(ceil(log(${latencyMs}) / ${Math.log(GAMMA)})))`;
}

/** The value a bucket stands for, in ms to the microsecond. */
export function bucketValue(bucket: number): number {
  if (bucket === ZERO_BUCKET) return 0;
  return Math.round(((2 * GAMMA ** bucket) / (GAMMA + 1)) * 1000) / 1000;
}

/**
 * The nearest-rank percentiles of a histogram (bucket → count, as ClickHouse returns a map),
 * or null when it holds nothing.
 */
export function percentilesOf(
  histogram: Readonly<Record<string, number | string>>,
  levels: readonly number[],
): number[] | null {
  const buckets = Object.entries(histogram)
    .map(([bucket, count]) => [Number(bucket), Number(count)] as const)
    .filter(([, count]) => count > 0)
    .sort((a, b) => a[0] - b[0]);
  const total = buckets.reduce((sum, [, count]) => sum + count, 0);
  if (total === 0) return null;
  return levels.map((level) => {
    const rank = Math.max(1, Math.ceil(level * total));
    let seen = 0;
    for (const [bucket, count] of buckets) {
      seen += count;
      if (seen >= rank) return bucketValue(bucket);
    }
    return bucketValue(buckets[buckets.length - 1]?.[0] ?? ZERO_BUCKET);
  });
}
