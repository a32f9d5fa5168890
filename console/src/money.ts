/** Amounts in a currency's minor units (cents, yen, fils): read from forms, shown on pages. */

/** How many decimals `currency` has (usd 2, jpy 0, kwd 3); 2 for a code Intl does not know. */
export function decimalsOf(currency: string): number {
  try {
    return (
      new Intl.NumberFormat('en', { style: 'currency', currency: currency.toUpperCase() }).resolvedOptions()
        .maximumFractionDigits ?? 2
    );
  } catch {
    return 2;
  }
}

/**
 * An amount as typed in whole units of `currency` ("9", "9.50"; "900" yen) in its minor units,
 * exactly; undefined when it is not one, or has more decimals than the currency.
 */
export function minorOf(text: string, currency: string): number | undefined {
  const digits = decimalsOf(currency);
  const match = /^(\d{1,9})(?:\.(\d+))?$/.exec(text.trim());
  if (match === null || (match[2] ?? '').length > digits) return undefined;
  return Number(`${match[1]}${(match[2] ?? '').padEnd(digits, '0')}`);
}

/** What a minor unit of `currency` is called on a form: "Cents", "JPY" (no decimals), "KWD thousandths". */
export function minorName(currency: string): string {
  const digits = decimalsOf(currency);
  const code = currency.toUpperCase();
  if (digits === 2) return 'Cents';
  return digits === 0 ? code : `${code} ${digits === 3 ? 'thousandths' : 'minor units'}`;
}

/** An amount of `currency` as a form's example reads it: "9.00", "900" (yen), "9.000" (dinar). */
export function amountExample(currency: string, whole = 9): string {
  const digits = decimalsOf(currency);
  return digits === 0 ? `${whole}00` : `${whole}.${'0'.repeat(digits)}`;
}

/** Minor units as a plain decimal in the currency's major unit (12.50), for CSV files. */
export function decimal(amount: number, currency: string): string {
  const digits = decimalsOf(currency);
  const sign = amount < 0 ? '-' : '';
  const text = String(Math.abs(amount)).padStart(digits + 1, '0');
  return digits === 0 ? `${sign}${text}` : `${sign}${text.slice(0, -digits)}.${text.slice(-digits)}`;
}

/** Money in the smallest unit, shown in its currency (900 usd → $9.00, 500 jpy → ¥500). */
export function money(amount: number, currency: string): string {
  const code = currency.toUpperCase();
  const digits = decimalsOf(code);
  return new Intl.NumberFormat('en', { style: 'currency', currency: code }).format(amount / 10 ** digits);
}
