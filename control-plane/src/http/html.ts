import { brandColours } from '@mcp-meter/contracts/brand';

/** Text made safe to place in HTML, in element content and in quoted attribute values alike. */
export const escapeHtml = (text: string): string =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );

/**
 * The CSS variables a hosted page draws its brand from: `--brand` (buttons), `--on-brand` (text
 * on a button) and `--brand-text` (links and outlines on white), by `brandColours`' contrast
 * rule. Anything but a lowercase `#rrggbb` falls back to the default, so a stored value can
 * never write CSS.
 */
export function brandStyle(colour: string | null | undefined): string {
  const c = brandColours(colour);
  return `:root{--brand:${c.brand};--on-brand:${c.onBrand};--brand-text:${c.brandText}}`;
}
