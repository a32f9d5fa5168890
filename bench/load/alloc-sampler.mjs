/**
 * Preloaded into a process under load (`node --import ./bench/load/alloc-sampler.mjs …`) to see
 * where its allocations come from: SIGUSR2 starts V8's sampling heap profiler, counting objects
 * the young and old collections have already freed (a call's garbage is what this is for); the
 * next SIGUSR2 stops it and writes the profile to `$ALLOC_PROFILE_DIR/<pid>-<n>.heapprofile`.
 * `bench/load/alloc-table.ts` reads it. The profiler samples one allocation in about every
 * `$ALLOC_SAMPLE_BYTES` bytes (128 unless set), so totals are estimates, close over many calls.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.ALLOC_PROFILE_DIR ?? process.cwd();
const interval = Number(process.env.ALLOC_SAMPLE_BYTES ?? 128);
const session = new Session();
session.connect();
let sampling = false;
let written = 0;

process.on('SIGUSR2', () => {
  if (!sampling) {
    session.post('HeapProfiler.enable');
    session.post('HeapProfiler.startSampling', {
      samplingInterval: interval,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    sampling = true;
    return;
  }
  session.post('HeapProfiler.stopSampling', (error, result) => {
    sampling = false;
    if (error) throw error;
    written += 1;
    writeFileSync(join(dir, `${process.pid}-${written}.heapprofile`), JSON.stringify(result.profile));
  });
});
