import { describe, expect, it } from 'vitest';
import { brandStyle } from '../src/http/html';

/** The CSS variables hosted pages draw their brand from, chosen for contrast (WCAG 2). */
describe('brandStyle', () => {
  it('puts white on dark colours and ink on light ones', () => {
    expect(brandStyle('#000000')).toBe(':root{--brand:#000000;--on-brand:#ffffff;--brand-text:#000000}');
    expect(brandStyle('#ffffff')).toBe(':root{--brand:#ffffff;--on-brand:#1d1d1f;--brand-text:#1d1d1f}');
    // #767676 is the lightest grey that reads at 4.5:1 on white; #777777 is just under.
    expect(brandStyle('#767676')).toContain('--brand-text:#767676');
    expect(brandStyle('#777777')).toContain('--brand-text:#1d1d1f');
  });

  it('falls back to the default for anything that is not a lowercase #rrggbb', () => {
    const fallback = brandStyle(null);
    expect(fallback).toBe(':root{--brand:#2d5bff;--on-brand:#ffffff;--brand-text:#2d5bff}');
    for (const value of [undefined, '', 'red', '#FFD700', '#fff', '#123456;}body{x:y', '#12345g'])
      expect(brandStyle(value)).toBe(fallback);
  });
});
