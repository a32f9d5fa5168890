import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/**
 * The CPU a cgroup allows, in cores: cgroup v2's `cpu.max` ("<quota> <period>", or "max …"
 * for none) or v1's `cpu.cfs_quota_us` over `cpu.cfs_period_us` (-1 for none); undefined
 * when there is no quota. A container limited to 2 CPUs on a 64-core host reads 2 here, while
 * its CPU affinity still shows all 64.
 */
export function cgroupCores(files: {
  cpuMax?: string;
  cfsQuota?: string;
  cfsPeriod?: string;
}): number | undefined {
  const v2 = /^(\d+)\s+(\d+)\s*$/.exec(files.cpuMax?.trim() ?? '');
  if (v2 !== null) return Number(v2[1]) / Number(v2[2]);
  const quota = Number(files.cfsQuota?.trim());
  const period = Number(files.cfsPeriod?.trim());
  return Number.isInteger(quota) && quota > 0 && Number.isInteger(period) && period > 0
    ? quota / period
    : undefined;
}

const read = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/**
 * The cores this process may use: its CPU affinity, bounded by the cgroup's CPU quota rounded
 * up (at least one). The default of PROXY_WORKERS: one worker a core it may really use.
 */
export function usableCores(
  affinity = availableParallelism(),
  quota = cgroupCores({
    cpuMax: read('/sys/fs/cgroup/cpu.max'),
    cfsQuota: read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'),
    cfsPeriod: read('/sys/fs/cgroup/cpu/cpu.cfs_period_us'),
  }),
): number {
  return Math.max(1, quota === undefined ? affinity : Math.min(affinity, Math.ceil(quota)));
}
