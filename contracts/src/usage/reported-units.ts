/**
 * Usage reported through the usage API counts against plan limits in whole units: the period's
 * reported values are summed exactly (they are decimals of at most 9 places, as ClickHouse
 * stores them) and the sum is rounded up once. A running limit counter keeps the same rule by
 * holding the sum's fractional part in billionths beside its whole units: 0.5 reported twice
 * counts 1, as the invoice and a counter started again from ClickHouse count it.
 */

/** Billionths in one unit: the usage record's 9 decimal places. */
export const NANOS_PER_UNIT = 1_000_000_000;
const NANOS = BigInt(NANOS_PER_UNIT);

/** JavaScript's exponent form (`1e-7`, `1.5e-8`, `1e+21`). */
const EXPONENT_FORM = /^(\d+)(?:\.(\d+))?e([+-]\d+)$/;
const PLAIN_FORM = /^(\d+)(?:\.(\d+))?$/;

/**
 * A non-negative decimal exactly, in billionths: a usage record's value as JavaScript writes it
 * (its shortest round-trip form, what ClickHouse reads into the Decimal), or ClickHouse's text of
 * a Decimal. Places past the ninth must be zeros; anything else is a programming error.
 */
export function toNanos(value: number | string): bigint {
  const text = typeof value === 'number' ? String(value) : value.trim();
  let digits: string;
  let places: number;
  const exponent = EXPONENT_FORM.exec(text);
  if (exponent !== null) {
    const fraction = exponent[2] ?? '';
    digits = `${exponent[1]}${fraction}`;
    places = fraction.length - Number(exponent[3]);
  } else {
    const plain = PLAIN_FORM.exec(text);
    if (plain === null) throw new RangeError(`not a non-negative decimal: ${text.slice(0, 40)}`);
    const fraction = plain[2] ?? '';
    digits = `${plain[1]}${fraction}`;
    places = fraction.length;
  }
  if (places <= 9) return BigInt(digits) * 10n ** BigInt(9 - places);
  const scale = 10n ** BigInt(places - 9);
  const whole = BigInt(digits);
  if (whole % scale !== 0n) throw new RangeError(`more than 9 decimal places: ${text.slice(0, 40)}`);
  return whole / scale;
}

/** Billionths split as a limit counter takes them: whole units and the billionths left over. */
export function splitNanos(nanos: bigint): { units: number; nanos: number } {
  return { units: Number(nanos / NANOS), nanos: Number(nanos % NANOS) };
}

/** What a limit counts for an exact reported sum in billionths: the sum rounded up once. */
export function unitsRoundedUp(nanos: bigint): number {
  return Number((nanos + NANOS - 1n) / NANOS);
}
