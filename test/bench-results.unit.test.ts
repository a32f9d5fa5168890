import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { plot, type Result, report } from '../bench/proxy-report';

const results = join(resolve(import.meta.dirname, '..'), 'bench', 'results');

describe("the proxy bench's committed results (bench/results/proxy.*)", () => {
  // The report and plot are what `npm run bench:proxy` writes from the measured figures: a
  // change to how they read must come with `npm run bench:proxy -- --report-only`, and a hand edit
  // of the report (a figure no run measured) fails here.
  const run = JSON.parse(readFileSync(join(results, 'proxy.json'), 'utf8')) as Result;

  it('the report is the one the bench writes from its own figures', () => {
    expect(readFileSync(join(results, 'proxy.md'), 'utf8')).toBe(report(run));
  });

  it('the plot is too', () => {
    expect(readFileSync(join(results, 'proxy.svg'), 'utf8')).toBe(plot(run));
  });
});
