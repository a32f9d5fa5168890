import { describe, expect, it } from 'vitest';
import { fasterProxyNote, type WorkersResult, workersGoalRow, workersSection } from '../bench/workers';

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

  it('estimates what more cores give where scaling was not measured, and points to it where it was', () => {
    expect(workersSection(run())).toContain('here it is\nestimated from the CPU per call');
    expect(workersSection(run(), true)).toContain('is measured below (scaling across cores)');
    expect(workersSection(run(), true)).not.toContain('estimated from the CPU per call');
  });

  it('bounds what a second worker could give by the cores one process left idle', () => {
    expect(workersSection(run())).toContain('could not pass 1.33× B3');
  });

  it('says what proxy CPU a call the goal would need with the rest of the machine’s as measured', () => {
    // The run of 2026-12-07 00:26: B3 15,585 calls/s at 58.0 µs a call, 1.55 cores busy.
    const note = fasterProxyNote(run({ B3: { rps: 15_585, cpuMicros: 58, machineCores: 1.55, errors: 0 } }));
    expect(note).toContain('(41.5 µs:');
    expect(note).toContain('2 × p / (p + o) = 1.17× at most');
    expect(note).toContain('1.3× needs p ≥ 1.86 × o = 77.0 µs');
    expect(workersSection(run())).toContain('1.3× needs p ≥ 1.86 × o = 130.0 µs');
  });

  it('says nothing of a cheaper proxy where the run read no calls or the cores are too few', () => {
    expect(fasterProxyNote(run({ B3: { rps: 0, cpuMicros: 0, machineCores: 0, errors: 0 } }))).toBe('');
    expect(fasterProxyNote(run({ cores: 1 }))).toBe('');
  });

  it('splits W2’s extra CPU a call into the halved connections’ part and the rest', () => {
    const section = workersSection(
      run({
        B3: { ...run().B3, cpuMicros: 60, switches: { voluntary: 0.02, involuntary: 0.3 } },
        B3h: {
          rps: 9_000,
          cpuMicros: 63.5,
          machineCores: 1.45,
          errors: 0,
          connections: 16,
          switches: { voluntary: 0.025, involuntary: 0.35 },
        },
        W2: {
          ...run().W2,
          cpuMicros: 64,
          switches: { voluntary: 0.035, involuntary: 0.9 },
          supervisorMicros: 0.04,
        },
      }),
    );
    expect(section).toContain('| B3 with 16 connections |');
    expect(section).toContain('| 0.020 + 0.300 | 0.025 + 0.350 | 0.035 + 0.900 |');
    expect(section).toContain('(4.0 µs over B3');
    expect(section).toContain('cost 63.5 µs a call, 3.5 more than with all of them');
    expect(section).toContain('The remaining 0.5 µs a call');
    expect(section).toContain('(B3 0.300, 3.0×)');
    expect(section).toContain('The supervisor took 0.04 µs');
  });

  it('leaves the split out for runs from before it was measured', () => {
    const section = workersSection(run());
    expect(section).toContain('| B3 with half the connections |');
    expect(section).not.toContain("Where W2's extra CPU");
  });

  it('reads the goal met only when both the throughput and the CPU a call are', () => {
    expect(workersGoalRow(run())).toMatch(/\| met \|\n$/);
    expect(workersGoalRow(run({ throughputRatio: 1.29 }))).toContain('**not met**');
    expect(workersGoalRow(run({ cpuPerCallRatio: 1.01 }))).toContain('**not met**');
  });

  it('reads the goal invalid when either side refused or failed calls behind an HTTP 200', () => {
    const refused = run({ W2: { ...run().W2, unsuccessful: 12 } });
    expect(workersGoalRow(refused)).toContain('**invalid**: 12 calls refused or failed');
    expect(workersGoalRow(run({ B3: { ...run().B3, unsuccessful: 0 } }))).toMatch(/\| met \|\n$/);
    expect(workersSection(refused)).toMatch(
      /\| tool calls refused or failed behind an HTTP 200 [^\n]*\| – \| – \| 12 \|/,
    );
  });
});
