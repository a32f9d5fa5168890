import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { B3_OVER_NODE, plot, type Result, report, unsuccessfulTargets } from '../bench/proxy-report';

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

  it('says which origin the one-core trials called', () => {
    const goalRow = (text: string) =>
      text.split('\n').find((l) => l.startsWith('| metered calls/s, one proxy'));
    const overC = report({ ...run, pinnedOrigin: 'c' });
    expect(goalRow(overC)).toContain('(B3), over the C origin |');
    expect(overC).toContain('The origin is the C one');
    // A run from before the flag called the Node origin, and its report must not claim otherwise.
    const overNode = report({ ...run, pinnedOrigin: undefined });
    expect(goalRow(overNode)).not.toContain('C origin');
    expect(overNode).toContain("The origin is the bench's Node one");
  });

  it('reads a goal invalid when its target refused or failed calls behind an HTTP 200', () => {
    const goalRow = (r: Result, start: string) =>
      report(r)
        .split('\n')
        .find((l) => l.startsWith(start)) ?? '';
    const refusing = {
      ...run,
      saturation: run.saturation.map((s) =>
        s.target === 'B3'
          ? { ...s, rounds: s.rounds.map((x, i) => ({ ...x, unsuccessful: i === 0 ? 3 : 0 })) }
          : s,
      ),
    };
    expect(unsuccessfulTargets(refusing)).toEqual(['B3']);
    expect(goalRow(refusing, '| B3 CPU per call / BP')).toContain('**invalid**: B3 refused or failed calls');
    expect(goalRow(refusing, '| proxy process CPU per metered call')).toContain('**invalid**');
    expect(goalRow(refusing, '| all-in-one service CPU')).not.toContain('**invalid**');
    expect(report(refusing)).toMatch(
      /\| tool calls refused or failed behind an HTTP 200 \(the proxy's metrics page\) \|[^\n]*\| 3 \|/,
    );
    const pinnedRefusing = { ...run, pinnedUnsuccessful: { B3: 1 } };
    expect(goalRow(pinnedRefusing, '| metered calls/s, one proxy')).toContain('**invalid**');
    expect(unsuccessfulTargets(run)).toEqual([]);
  });

  it("judges one core's goal by the better of B3's two origins, and shows both", () => {
    const goalRow = (r: Result) =>
      report(r)
        .split('\n')
        .find((l) => l.startsWith('| metered calls/s, one proxy')) ?? '';
    const busy = { hop: 0.8, rest: 0.9 };
    const overC = { ...run, pinned: { ...run.pinned, B3: 17_000 }, pinnedOrigin: 'c' as const };
    expect(goalRow({ ...overC, pinned: { ...overC.pinned, [B3_OVER_NODE]: 19_999 } })).toContain(
      '**not met**',
    );
    const both = goalRow({
      ...overC,
      pinned: { ...overC.pinned, [B3_OVER_NODE]: 21_000 },
      pinnedBusy: { ...run.pinnedBusy, [B3_OVER_NODE]: busy },
    });
    expect(both).toMatch(
      /^\| [^|]+ \| 17000.*; over the bench's Node origin 21000 \(its core 80% busy, everything else 0\.90 of a core\) \| ≥ 20,000 \| met \|$/,
    );
  });
});
