import { describe, expect, it } from 'vitest';
import { groupPath, inCpuV1, inV2 } from '../bench/harness/idle-group';

// Where the bench finds a process's CPU group, to put it back after the latency trials.
describe('the bench idle group: a process group path from /proc/<pid>/cgroup', () => {
  const v1 = [
    '9:name=systemd:/',
    '3:cpuset:/pinned',
    '2:cpuacct:/acct',
    '1:cpu:/mcpmeter-bench-batch',
    '0::/',
  ].join('\n');

  it('reads the cpu hierarchy of cgroup v1, not cpuset or cpuacct', () => {
    expect(groupPath(v1, inCpuV1)).toBe('/mcpmeter-bench-batch');
  });

  it('reads cpu where it is mounted with other controllers', () => {
    expect(groupPath('4:memory:/m\n2:cpu,cpuacct:/system.slice/x.service\n', inCpuV1)).toBe(
      '/system.slice/x.service',
    );
    expect(groupPath('2:cpuacct,cpu:/a\n', inCpuV1)).toBe('/a');
  });

  it('reads cgroup v2 and keeps colons in the path', () => {
    expect(groupPath('0::/user.slice/a:b\n', inV2)).toBe('/user.slice/a:b');
  });

  it('answers the root where the hierarchy has no line', () => {
    expect(groupPath('3:cpuset:/\n', inCpuV1)).toBe('/');
  });
});
