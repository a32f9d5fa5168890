import { describe, expect, it } from 'vitest';
import { cgroupCores, usableCores } from '../src/cores';

/** PROXY_WORKERS' default: the cores a container may really use, not the host's. */
describe('usable cores', () => {
  it('reads a cgroup v2 quota, and none', () => {
    expect(cgroupCores({ cpuMax: '200000 100000\n' })).toBe(2);
    expect(cgroupCores({ cpuMax: '150000 100000' })).toBe(1.5);
    expect(cgroupCores({ cpuMax: 'max 100000\n' })).toBeUndefined();
    expect(cgroupCores({})).toBeUndefined();
  });

  it('reads a cgroup v1 quota, and none', () => {
    expect(cgroupCores({ cfsQuota: '400000\n', cfsPeriod: '100000\n' })).toBe(4);
    expect(cgroupCores({ cfsQuota: '-1\n', cfsPeriod: '100000\n' })).toBeUndefined();
    expect(cgroupCores({ cfsQuota: 'garbage', cfsPeriod: '100000' })).toBeUndefined();
  });

  it('bounds the affinity by the quota, rounded up, and is at least one', () => {
    expect(usableCores(64, 2)).toBe(2);
    expect(usableCores(64, 1.5)).toBe(2);
    expect(usableCores(2, 8)).toBe(2);
    expect(usableCores(4, undefined)).toBe(4);
    expect(usableCores(8, 0.25)).toBe(1);
  });
});
