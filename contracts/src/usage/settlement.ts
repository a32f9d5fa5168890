/**
 * The ingest watermark, as billing asks for it: has everything handed to the usage bus so far
 * reached the usage store? A period is billed only after a `true` taken once the period (plus
 * its lateness allowance) had ended, so no record still travelling through the bus is left out.
 */
export interface UsageSettlement {
  /**
   * True once every record the bus had accepted when this was called is stored; false when that
   * did not happen within `timeoutMs` (a lagging or stopped consumer, an unreachable broker).
   */
  settled(timeoutMs: number): Promise<boolean>;
}
