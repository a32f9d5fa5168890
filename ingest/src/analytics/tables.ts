import type { Environment } from '@mcp-meter/contracts/usage-record';

/**
 * The analytics rollup tables of an environment (ingest/src/clickhouse/migrations/003 to 007 and 009),
 * from a closed set: no caller string reaches an identifier.
 */
export interface RollupTables {
  /** Per slot and call shape: calls, units, errors, latency histogram. */
  rollup: string;
  /** Per slot, grouping (tool, server, product, plan, outcome) and value: calls, units, errors. */
  groups: string;
  /** Per slot: every call of the meter together (calls, units, errors). */
  totals: string;
  /** Per slot, paywall form, era, session and product: shown, first showing. */
  paywalls: string;
  /** Per slot and customer, sorted by customer: calls, units, errors. */
  customers: string;
  /** The same rows sorted by slot, for some slots of every customer. */
  customerSlots: string;
  /** Per UTC day, tool and server: calls, errors, latency histogram. */
  days: string;
  /** Per UTC day and customer: calls. */
  customerDays: string;
  /** Slots the ingest consumer touched, and when. */
  marks: string;
  /** Slots rebuilt, and as of when. */
  rolls: string;
  /** UTC days summed, and as of when. */
  dayRolls: string;
}

const tablesOf = (environment: Environment): RollupTables => ({
  rollup: `usage_rollup_${environment}`,
  groups: `usage_rollup_groups_${environment}`,
  totals: `usage_rollup_totals_${environment}`,
  paywalls: `usage_rollup_paywalls_${environment}`,
  customers: `usage_rollup_customers_${environment}`,
  customerSlots: `usage_rollup_customer_slots_${environment}`,
  days: `usage_rollup_days_${environment}`,
  customerDays: `usage_rollup_customer_days_${environment}`,
  marks: `usage_slot_marks_${environment}`,
  rolls: `usage_slot_rolls_${environment}`,
  dayRolls: `usage_day_rolls_${environment}`,
});

export const ROLLUP_TABLES: Readonly<Record<Environment, RollupTables>> = {
  sandbox: tablesOf('sandbox'),
  live: tablesOf('live'),
};
