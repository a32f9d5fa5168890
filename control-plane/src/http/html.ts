/** Text made safe to place in HTML, in element content and in quoted attribute values alike. */
export const escapeHtml = (text: string): string =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );

const HEX_COLOUR = /^#[0-9a-f]{6}$/;
const DEFAULT_BRAND = '#2d5bff';

/** WCAG 2 relative luminance of a `#rrggbb` colour. */
function luminance(hex: string): number {
  const channel = (offset: number) => {
    const c = Number.parseInt(hex.slice(offset, offset + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

const contrast = (a: number, b: number) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);

/**
 * The CSS variables a hosted page draws its brand from: `--brand` (buttons), `--on-brand` (text
 * on a button: white or near-black, whichever reads better) and `--brand-text` (links and
 * outlines on white: the brand when it reads at 4.5:1, else near-black). Anything but a
 * lowercase `#rrggbb` falls back to the default, so a stored value can never write CSS.
 */
export function brandStyle(colour: string | null | undefined): string {
  const brand = colour !== null && colour !== undefined && HEX_COLOUR.test(colour) ? colour : DEFAULT_BRAND;
  const l = luminance(brand);
  const white = 1;
  const ink = luminance('#1d1d1f');
  const onBrand = contrast(l, white) >= contrast(l, ink) ? '#ffffff' : '#1d1d1f';
  const brandText = contrast(l, white) >= 4.5 ? brand : '#1d1d1f';
  return `:root{--brand:${brand};--on-brand:${onBrand};--brand-text:${brandText}}`;
}
