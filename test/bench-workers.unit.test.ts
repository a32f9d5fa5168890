import { describe, expect, it } from 'vitest';
import { type WorkersResult, workersGoalRow, workersSection } from '../bench/workers';

const trial = (rps: number, cpuMicros: number, machineCores: number) => ({
  rps,
  errors: 0,
  cpuMicros,
  machineCores,
});

const run = (extra: Partial<WorkersResult> = {}): WorkersResult => ({
  rounds: 3,
  trialSeconds: 5,
  cores: 2,
  B3: { rps: 10_000, cpuMicros: 80, machineCores: 1.5, errors: 0 },
  W2: { rps: 13_000, cpuMicros: 78, machineCores: 1.95, errors: 0 },
  throughputRatio: 1.3,
  throughputRatioRange: [1.2, 1.4],
  cpuPerCallRatio: 0.975,
  trials: { B3: [trial(10_000, 80, 1.5)], W2: [trial(13_000, 78, 1.95)] },
  ...extra,
});

describe('the bench report’s workers section', () => {
  it('names the C origin where the trials called it', () => {
    const section = workersSection(run({ origin: 'c' }));
    expect(section).toContain('(`bench/load/origin.c`, a fixed answer from one epoll loop in C');
    expect(section).not.toContain("(the bench's Node origin)");
  });

  it('names the Node origin where the trials called it, and in runs from before the choice', () => {
    expect(workersSection(run({ origin: 'node' }))).toContain("(the bench's Node origin)");
    expect(workersSection(run())).toContain("(the bench's Node origin)");
  });

  it('bounds what a second worker could give by the cores one process left idle', () => {
    expect(workersSection(run())).toContain('could not pass 1.33× B3');
  });

  it('reads the goal met only when both the throughput and the CPU a call are', () => {
    expect(workersGoalRow(run())).toMatch(/\| met \|\n$/);
    expect(workersGoalRow(run({ throughputRatio: 1.29 }))).toContain('**not met**');
    expect(workersGoalRow(run({ cpuPerCallRatio: 1.01 }))).toContain('**not met**');
  });
});
