/**
 * A provider's brand colour and the colours drawn with it on a white page, chosen by WCAG 2
 * contrast: the text on a button (white or near-black, whichever reads better) and the colour of
 * links and outlines (the brand when it reads at 4.5:1 on white, else near-black). The hosted
 * pages and the console's preview use this one rule.
 */

export const BRAND_COLOUR = /^#[0-9a-f]{6}$/;
export const DEFAULT_BRAND = '#2d5bff';
const INK = '#1d1d1f';

export interface BrandColours {
  brand: string;
  onBrand: string;
  brandText: string;
}

/** WCAG 2 relative luminance of a `#rrggbb` colour. */
function luminance(hex: string): number {
  const channel = (offset: number) => {
    const c = Number.parseInt(hex.slice(offset, offset + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

const contrast = (a: number, b: number) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);

/** Anything but a lowercase `#rrggbb` is the default brand. */
export function brandColours(colour: string | null | undefined): BrandColours {
  const brand = colour !== null && colour !== undefined && BRAND_COLOUR.test(colour) ? colour : DEFAULT_BRAND;
  const l = luminance(brand);
  const onWhite = contrast(l, 1);
  return {
    brand,
    onBrand: onWhite >= contrast(l, luminance(INK)) ? '#ffffff' : INK,
    brandText: onWhite >= 4.5 ? brand : INK,
  };
}
