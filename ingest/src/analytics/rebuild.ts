import {
  HAS_LATENCY,
  IS_ERROR,
  IS_PAYWALL,
  LATENCY_BUCKET,
  OUTCOME,
  PAYWALL_ERA,
  PAYWALL_FORM,
  PAYWALL_SESSION,
  PRODUCT,
  ROLLUP_GROUPINGS,
  SERVER,
  TOOL,
} from './record-sql';
import type { RollupTables } from './tables';

/**
 * The statements that rebuild the rollups, in order. `records` is a FROM that yields each raw
 * record's last copy in the range; `slots` the range as a condition on `slot`, `day` one UTC day
 * on `slot` (its start a parameter `day`); every row is written at `{version}` (µs). After the
 * figures, every group the range no longer has gets a zero row of the same version, so FINAL
 * reads it as gone (a record resent with other properties or another time left it).
 */
const AT = "fromUnixTimestamp64Micro({version:Int64}, 'UTC')";
const SLOT_OF = "toDateTime(toStartOfFifteenMinutes(timestamp), 'UTC')";
/** The groupings the groups rollup keeps, each as (name, the record's value). */
const GROUPINGS = Object.entries(ROLLUP_GROUPINGS)
  .map(([name, value]) => `tuple('${name}', ${value})`)
  .join(', ');

/** Zero rows for the groups of `table` in `where` that this version did not write. */
const zeroGone = (table: string, columns: string, where: string) =>
  `INSERT INTO ${table}
   SELECT ${columns} FROM (SELECT * FROM ${table} FINAL WHERE ${where}) WHERE version < ${AT}`;

export function slotStatements(t: RollupTables, records: string, slots: string): string[] {
  return [
    `INSERT INTO ${t.rollup}
     SELECT provider_id, meter_ref, ${SLOT_OF} AS slot, ${TOOL} AS tool, ${SERVER} AS server,
            ${PRODUCT} AS product, ${OUTCOME} AS outcome, count(), sum(value), countIf(${IS_ERROR}),
            countIf(${HAS_LATENCY}), sumMapIf(map(${LATENCY_BUCKET}, toUInt64(1)), ${HAS_LATENCY}), ${AT}
       FROM ${records}
      GROUP BY provider_id, meter_ref, slot, tool, server, product, outcome`,
    // Each record once per grouping: (grouping, its value), from a closed list.
    `INSERT INTO ${t.groups}
     SELECT provider_id, meter_ref, g.1 AS dimension, ${SLOT_OF} AS slot, g.2 AS key,
            count(), sum(value), countIf(${IS_ERROR}), ${AT}
       FROM ${records}
      ARRAY JOIN [${GROUPINGS}] AS g
      GROUP BY provider_id, meter_ref, dimension, slot, key`,
    `INSERT INTO ${t.totals}
     SELECT provider_id, meter_ref, ${SLOT_OF} AS slot, count(), sum(value), countIf(${IS_ERROR}), ${AT}
       FROM ${records}
      GROUP BY provider_id, meter_ref, slot`,
    `INSERT INTO ${t.paywalls}
     SELECT provider_id, meter_ref, ${SLOT_OF} AS slot, ${PAYWALL_FORM} AS form, ${PAYWALL_ERA} AS era,
            ${PAYWALL_SESSION} AS session, ${PRODUCT} AS product, count(), min(timestamp), ${AT}
       FROM ${records}
      WHERE ${IS_PAYWALL}
      GROUP BY provider_id, meter_ref, slot, form, era, session, product`,
    // By customer twice, sorted by slot and by customer: the records once, into the first; the
    // second is this version's rows of it.
    `INSERT INTO ${t.customerSlots}
     SELECT provider_id, meter_ref, ${SLOT_OF} AS slot, customer_ref, count(), sum(value), countIf(${IS_ERROR}), ${AT}
       FROM ${records}
      GROUP BY provider_id, meter_ref, slot, customer_ref`,
    `INSERT INTO ${t.customers}
     SELECT provider_id, meter_ref, customer_ref, slot, calls, units, errors, version
       FROM ${t.customerSlots}
      WHERE (${slots}) AND version = ${AT}`,
    zeroGone(
      t.rollup,
      `provider_id, meter_ref, slot, tool, server, product, outcome, 0, 0, 0, 0, map(), ${AT}`,
      slots,
    ),
    zeroGone(t.groups, `provider_id, meter_ref, dimension, slot, key, 0, 0, 0, ${AT}`, slots),
    zeroGone(t.totals, `provider_id, meter_ref, slot, 0, 0, 0, ${AT}`, slots),
    zeroGone(t.paywalls, `provider_id, meter_ref, slot, form, era, session, product, 0, first, ${AT}`, slots),
    // The customers gone, found in the slot-sorted table (both hold the same groups): first in
    // the customer-sorted one, while the slot-sorted one still tells them by their older version.
    `INSERT INTO ${t.customers}
     SELECT provider_id, meter_ref, customer_ref, slot, 0, 0, 0, ${AT}
       FROM (SELECT * FROM ${t.customerSlots} FINAL WHERE ${slots}) WHERE version < ${AT}`,
    zeroGone(t.customerSlots, `provider_id, meter_ref, slot, customer_ref, 0, 0, 0, ${AT}`, slots),
  ];
}

export function dayStatements(t: RollupTables): string[] {
  const inDay =
    "slot >= fromUnixTimestamp64Milli({day:Int64}, 'UTC') AND slot < fromUnixTimestamp64Milli({day:Int64}, 'UTC') + INTERVAL 1 DAY";
  const theDay = "day = toDate(fromUnixTimestamp64Milli({day:Int64}, 'UTC'))";
  return [
    `INSERT INTO ${t.days}
     SELECT provider_id, meter_ref, toDate(slot) AS day, tool, server, sum(calls), sum(errors), sumMap(latency), ${AT}
       FROM (SELECT * FROM ${t.rollup} FINAL WHERE ${inDay})
      WHERE calls > 0 AND tool != ''
      GROUP BY provider_id, meter_ref, day, tool, server`,
    `INSERT INTO ${t.customerDays}
     SELECT provider_id, meter_ref, toDate(slot) AS day, customer_ref, sum(calls), ${AT}
       FROM (SELECT * FROM ${t.customerSlots} FINAL WHERE ${inDay})
      WHERE calls > 0
      GROUP BY provider_id, meter_ref, day, customer_ref`,
    zeroGone(t.days, `provider_id, meter_ref, day, tool, server, 0, 0, map(), ${AT}`, theDay),
    zeroGone(t.customerDays, `provider_id, meter_ref, day, customer_ref, 0, ${AT}`, theDay),
    `INSERT INTO ${t.dayRolls} SELECT toDate(fromUnixTimestamp64Milli({day:Int64}, 'UTC')), ${AT}`,
  ];
}
