import { ID, newId } from './kit/ids';

export const ENVIRONMENTS = ['sandbox', 'live'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

/**
 * One usage record as it travels through the bus and lands in ClickHouse. Records are
 * immutable; `id` is the identity a replay or a resend is deduplicated on, scoped by
 * (providerId, environment, meterRef, customerRef).
 */
export interface UsageRecord {
  id: string;
  providerId: string;
  environment: Environment;
  meterRef: string;
  meterName: string;
  customerRef: string;
  /** Exact decimal: at most 9 fractional digits, 0 ≤ value ≤ 1e15. */
  value: number;
  /** ISO-8601 UTC with millisecond precision. */
  timestamp: string;
  properties: Record<string, unknown>;
  /**
   * Set when whoever sent the record chose its id (the usage API's `id`): only such a record can
   * come again under another time, so only its earlier copies are looked for when it is stored
   * (the rollups' moved records). Absent for an id made here (the proxy's calls, the limit
   * check's, a usage call without one), whose every copy carries the same time.
   */
  idGiven?: true;
}

/**
 * How the paywall was shown to a client: a URL-mode elicitation (the 2026 era's input_required
 * result, or asked inside a 2025-11-25 call), the -32042 error naming one, or a tool result whose
 * text carries the checkout link.
 */
export const PAYWALL_FORMS = ['url_elicitation', 'error_32042', 'text_link'] as const;
export type PaywallForm = (typeof PAYWALL_FORMS)[number];

/** A paywall as a call met it: its form, the client's era, and the checkout it offered. */
export interface PaywallShown {
  form: PaywallForm;
  /** modern: MCP 2026-07-28 and later (stateless); legacy: the session eras up to 2025-11-25. */
  era: 'modern' | 'legacy';
  /** The checkout session (cs_…) offered; null when none could be. */
  checkoutSessionId: string | null;
}

/** What is known of one gated call (a proxied tools/call, or an SDK limit check that consumes). */
export interface CallFacts {
  outcome: 'success' | 'error' | 'paywall' | 'unavailable' | 'upstream_error' | 'input_required' | 'task';
  /** The call spent a unit of a plan's allowance: limits count it (and only it). */
  admitted: boolean;
  /** The proxy refused the call (paywall, limit store down, bad request state): never billable. */
  refused?: boolean;
  /** Credits the call spent of the customer's balance (plans paid from credits); absent otherwise. */
  credits?: number;
  productId: string | null;
  /** The plan the call was judged by: the customer's plan of the product, when it has one. */
  planId?: string | undefined;
  /** Proxied calls: the tool, the server, the time to answer, and whether the client left. */
  tool?: string;
  server?: string;
  latencyMs?: number;
  cancelled?: boolean;
  /** Calls the SDK limit check recorded. */
  source?: 'sdk.limits';
  /** A call the paywall answered: how it was shown. */
  paywall?: PaywallShown | undefined;
}

/**
 * The one usage record of a gated call, on the requests meter: value 1, with the facts as
 * properties (`admitted`, `refused` and `cancelled` only when true). Built without the validator: every
 * field comes from a trusted snapshot or the producing process, and the proxy calls it per call.
 */
export function callRecord(
  meter: { providerId: string; environment: Environment; meterRef: string; meterName: string },
  customerRef: string,
  timestamp: string,
  facts: CallFacts,
): UsageRecord {
  const properties: Record<string, unknown> = {};
  if (facts.source !== undefined) properties.source = facts.source;
  if (facts.tool !== undefined) properties.tool = facts.tool;
  properties.outcome = facts.outcome;
  if (facts.server !== undefined) properties.server = facts.server;
  if (facts.latencyMs !== undefined) properties.latencyMs = facts.latencyMs;
  if (facts.productId !== null) properties.productId = facts.productId;
  if (facts.planId !== undefined) properties.planId = facts.planId;
  if (facts.admitted) properties.admitted = true;
  if (facts.refused === true) properties.refused = true;
  if (facts.credits !== undefined && facts.credits > 0) properties.credits = facts.credits;
  if (facts.cancelled === true) properties.cancelled = true;
  if (facts.paywall !== undefined) {
    properties.paywall = facts.paywall.form;
    properties.paywallEra = facts.paywall.era;
    if (facts.paywall.checkoutSessionId !== null)
      properties.checkoutSessionId = facts.paywall.checkoutSessionId;
  }
  return {
    id: newId(ID.usageRecord),
    providerId: meter.providerId,
    environment: meter.environment,
    meterRef: meter.meterRef,
    meterName: meter.meterName,
    customerRef,
    value: 1,
    timestamp,
    properties,
  };
}

/** The fields a producer supplies; the rest comes from the authenticated context. */
export interface UsageInput {
  id?: unknown;
  customerRef?: unknown;
  value?: unknown;
  timestamp?: unknown;
  properties?: unknown;
}

export interface UsageContext {
  providerId: string;
  environment: Environment;
  meterRef: string;
  meterName: string;
  now: Date;
}

export interface FieldError {
  path: string;
  message: string;
}

export const USAGE_LIMITS = Object.freeze({
  maxValue: 1e15,
  maxFractionDigits: 9,
  maxCustomerRefLength: 255,
  maxIdLength: 128,
  maxPropertiesBytes: 4096,
  maxPropertiesDepth: 3,
  maxPropertyKeys: 50,
  /** Late records up to 35 days old are accepted so a monthly period can still be corrected. */
  maxPastMs: 35 * 24 * 3600 * 1000,
  /** Clock skew allowance for producers whose clocks run ahead. */
  maxFutureMs: 5 * 60 * 1000,
});

const ID_PATTERN = /^[A-Za-z0-9_.:-]+$/;

/** JavaScript's exponent form (`1e-7`, `1.25e+21`): what `String` gives below 1e-6 and from 1e21. */
const EXPONENT_FORM = /^\d(?:\.(\d+))?e([+-]\d+)$/;

/**
 * Decimal places of the number as JavaScript writes it (its shortest round-trip form): `0.125` → 3,
 * `1e-7` (0.0000001) → 7, `1.5e-8` → 9. ClickHouse reads both forms into a Decimal exactly.
 */
export function fractionDigits(value: number): number {
  const text = String(value);
  const exponentForm = EXPONENT_FORM.exec(text);
  if (exponentForm !== null) return Math.max(0, (exponentForm[1]?.length ?? 0) - Number(exponentForm[2]));
  const dot = text.indexOf('.');
  return dot === -1 ? 0 : text.length - dot - 1;
}

function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + children.reduce<number>((max, child) => Math.max(max, depthOf(child)), 0);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * The single validator every producer uses. Returns the normalised record, or every problem
 * found with the path of the offending field (prefixed by `pathPrefix`, e.g. `records/3`).
 */
export function buildUsageRecord(
  input: UsageInput,
  context: UsageContext,
  pathPrefix = '',
): { record: UsageRecord; errors?: undefined } | { record?: undefined; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const at = (field: string) => `${pathPrefix}/${field}`;

  const { customerRef } = input;
  if (typeof customerRef !== 'string' || customerRef.trim() === '') {
    errors.push({ path: at('customerRef'), message: 'must be a non-empty string' });
  } else if (customerRef.length > USAGE_LIMITS.maxCustomerRefLength) {
    errors.push({
      path: at('customerRef'),
      message: `must be at most ${USAGE_LIMITS.maxCustomerRefLength} characters`,
    });
  } else if (/\p{Cc}/u.test(customerRef)) {
    errors.push({ path: at('customerRef'), message: 'must not contain control characters' });
  }

  let value = 1;
  if (input.value !== undefined) {
    if (typeof input.value !== 'number' || !Number.isFinite(input.value)) {
      errors.push({ path: at('value'), message: 'must be a finite number' });
    } else if (input.value < 0 || input.value > USAGE_LIMITS.maxValue) {
      errors.push({ path: at('value'), message: `must be between 0 and ${USAGE_LIMITS.maxValue}` });
    } else if (fractionDigits(input.value) > USAGE_LIMITS.maxFractionDigits) {
      errors.push({
        path: at('value'),
        message: `must have at most ${USAGE_LIMITS.maxFractionDigits} decimal places`,
      });
    } else {
      value = input.value;
    }
  }

  let timestamp = context.now;
  if (input.timestamp !== undefined) {
    const parsed = typeof input.timestamp === 'string' ? new Date(input.timestamp) : undefined;
    if (
      parsed === undefined ||
      Number.isNaN(parsed.getTime()) ||
      !/^\d{4}-\d{2}-\d{2}T/.test(String(input.timestamp))
    ) {
      errors.push({ path: at('timestamp'), message: 'must be an ISO-8601 date-time string' });
    } else if (parsed.getTime() < context.now.getTime() - USAGE_LIMITS.maxPastMs) {
      errors.push({ path: at('timestamp'), message: 'is more than 35 days in the past' });
    } else if (parsed.getTime() > context.now.getTime() + USAGE_LIMITS.maxFutureMs) {
      errors.push({ path: at('timestamp'), message: 'is more than 5 minutes in the future' });
    } else {
      timestamp = parsed;
    }
  }

  let properties: Record<string, unknown> = {};
  if (input.properties !== undefined) {
    if (!isPlainObject(input.properties)) {
      errors.push({ path: at('properties'), message: 'must be an object' });
    } else if (Object.keys(input.properties).length > USAGE_LIMITS.maxPropertyKeys) {
      errors.push({
        path: at('properties'),
        message: `must have at most ${USAGE_LIMITS.maxPropertyKeys} keys`,
      });
    } else if (depthOf(input.properties) > USAGE_LIMITS.maxPropertiesDepth) {
      errors.push({
        path: at('properties'),
        message: `must be nested at most ${USAGE_LIMITS.maxPropertiesDepth} levels deep`,
      });
    } else if (Buffer.byteLength(JSON.stringify(input.properties)) > USAGE_LIMITS.maxPropertiesBytes) {
      errors.push({
        path: at('properties'),
        message: `must serialise to at most ${USAGE_LIMITS.maxPropertiesBytes} bytes`,
      });
    } else {
      properties = input.properties;
    }
  }

  let id: string | undefined;
  if (input.id !== undefined) {
    if (typeof input.id !== 'string' || input.id.length === 0 || input.id.length > USAGE_LIMITS.maxIdLength) {
      errors.push({
        path: at('id'),
        message: `must be a string of 1 to ${USAGE_LIMITS.maxIdLength} characters`,
      });
    } else if (!ID_PATTERN.test(input.id)) {
      errors.push({ path: at('id'), message: 'may contain only letters, digits and _ . : -' });
    } else {
      id = input.id;
    }
  }

  if (errors.length > 0) return { errors };
  return {
    record: {
      id: id ?? newId(ID.usageRecord),
      providerId: context.providerId,
      environment: context.environment,
      meterRef: context.meterRef,
      meterName: context.meterName,
      customerRef: String(customerRef),
      value,
      timestamp: timestamp.toISOString(),
      properties,
      ...(id === undefined ? {} : { idGiven: true as const }),
    },
  };
}

/** Parses a record read back from the bus; anything malformed is reported, never guessed at. */
export function parseBusRecord(raw: string): UsageRecord | undefined {
  try {
    return toBusRecord(JSON.parse(raw));
  } catch {
    return undefined;
  }
}

/** A bus message: one record, or `{ events: [...] }`; undefined when any part is malformed. */
export function parseBusMessage(raw: string): UsageRecord[] | undefined {
  try {
    const value: unknown = JSON.parse(raw);
    if (isPlainObject(value) && Array.isArray(value.events)) {
      const records = value.events.map(toBusRecord);
      return records.every((r) => r !== undefined) ? (records as UsageRecord[]) : undefined;
    }
    const record = toBusRecord(value);
    return record === undefined ? undefined : [record];
  } catch {
    return undefined;
  }
}

/** The form producers write (`Date.prototype.toISOString`), the only one the store is given. */
const BUS_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * Checks a record from the bus as far as ClickHouse could refuse it: a value or timestamp the
 * insert cannot parse would otherwise fail its whole batch on every retry and stall the partition.
 */
function toBusRecord(value: unknown): UsageRecord | undefined {
  if (!isPlainObject(value)) return undefined;
  const {
    id,
    providerId,
    environment,
    meterRef,
    meterName,
    customerRef,
    value: v,
    timestamp,
    properties,
  } = value;
  if (
    typeof id !== 'string' ||
    typeof providerId !== 'string' ||
    !ENVIRONMENTS.includes(environment as Environment) ||
    typeof meterRef !== 'string' ||
    typeof meterName !== 'string' ||
    typeof customerRef !== 'string' ||
    typeof v !== 'number' ||
    !(v >= 0 && v <= USAGE_LIMITS.maxValue) ||
    fractionDigits(v) > USAGE_LIMITS.maxFractionDigits ||
    typeof timestamp !== 'string' ||
    !BUS_TIMESTAMP.test(timestamp) ||
    !isPlainObject(properties)
  ) {
    return undefined;
  }
  return {
    id,
    providerId,
    environment: environment as Environment,
    meterRef,
    meterName,
    customerRef,
    value: v,
    timestamp,
    properties,
    ...(value.idGiven === true ? { idGiven: true as const } : {}),
  };
}

let stampMs = Number.NaN;
let stamp = '';

/**
 * A record's timestamp for `now` (ISO 8601, UTC, milliseconds), made once a millisecond: the
 * calls metered within one share it.
 */
export function recordTimestamp(now = Date.now()): string {
  if (now !== stampMs) {
    stamp = new Date(now).toISOString();
    stampMs = now;
  }
  return stamp;
}

/** Where a record keeps its JSON once made: a property JSON, keys and spreads do not see. */
const TEXT = Symbol('usage record JSON');

/**
 * A usage record's JSON, made once: the emitter writes it to its spool and the bus publishes the
 * same text, where each used to serialize the record itself. A record is not changed once
 * emitted; the text lives as long as the record object does. It is kept on the record itself (a
 * hidden property) rather than in a weak map: a record waits about a tenth of a second for its
 * publish, and entries of a weak map keyed by young objects are work for every minor collection.
 * With `keep` false the text is made but not kept, for a caller whose bus never sends it.
 */
export function recordJson(record: UsageRecord, keep = true): string {
  const kept = (record as { [TEXT]?: string })[TEXT];
  if (kept !== undefined) return kept;
  const text = JSON.stringify(record);
  // Not enumerable: a copy made with a spread does not carry the original's text.
  if (keep && Object.isExtensible(record)) Object.defineProperty(record, TEXT, { value: text });
  return text;
}

/** Kafka message key: one customer's records stay on one partition, in order. */
export function partitionKey(record: UsageRecord): string {
  return `${record.providerId}:${record.customerRef}`;
}
