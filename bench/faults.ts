/**
 * The fault matrix (issue 32, shared/design/reliability.md) as a program: each fault is caused
 * under load on loopback, and what clients got, what the origin executed and what was recorded
 * and admitted are reconciled exactly. Results go to bench/results/faults.{md,json}.
 *
 *   npm run faults                 # every fault below, about 4 minutes
 *   npm run faults -- --only proxy-kill,pg-stop
 *   npm run faults -- --only proxy-kill --results-dir /tmp/x    # CI's subset
 *
 * Exits 1 when any fault lost a served call, passed a limit, stranded allowance (counted calls
 * beyond the billable ones) or answered a 5xx.
 *
 * Faults:
 *   aio-kill    the all-in-one service SIGKILLed under load, started again on its data directory
 *   proxy-kill  a proxy of the distributed stack SIGKILLed under load, started again
 *   pg-stop     PostgreSQL stopped for OUTAGE_SECONDS under API load
 *   redis-stop  Redis stopped for OUTAGE_SECONDS under proxy load
 *   cp-kill     control plane + ingest SIGKILLed and started again at once
 *   redis-flush a customer at its limit, then Redis FLUSHALL and a restart of every process
 *   kafka-kill  the Kafka broker SIGKILLed under proxy load, started again OUTAGE_SECONDS later
 *   webhook-kill control plane SIGKILLed while webhook deliveries are in flight, started again
 *
 * Starts PostgreSQL, Redis and Kafka on free loopback ports (deploy/infra.sh), sends traffic only
 * to 127.0.0.1, bounded in calls and time, and stops everything it started.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { failures } from './faults/load';
import {
  API_BACK_SECONDS,
  args,
  CLIENTS,
  infra,
  log,
  OUTAGE_SECONDS,
  procs,
  root,
  startedInfra,
  stopProc,
  work,
} from './faults/run';
import {
  aioKill,
  cpKill,
  kafkaKill,
  pgStop,
  proxyKill,
  redisFlush,
  redisStop,
  webhookKill,
} from './faults/scenarios';
import { type Row, type Stack, startStack } from './faults/stack';

/** Calls billed beyond what the origin ran: a record stored twice would show here. */
const doubled = (r: Row) => (r.executed > 0 && r.billable > 0 ? Math.max(0, r.billable - r.executed) : 0);

function report(rows: Row[]): void {
  const lines = [
    '# Fault matrix',
    '',
    `\`npm run faults\` on ${new Date().toISOString().slice(0, 10)}: ${CLIENTS} client loops on loopback, outages of ${OUTAGE_SECONDS} s.`,
    'Clients: calls served (an answer with a result), refused (a paywall or a retry-later error),',
    'failed (no answer, or 503) and server errors (any other 5xx). Executed: what the origin ran.',
    'Recorded: usage records stored for the customer. Admitted: what the limit counts (stored',
    "admitted calls plus leases still open). Billable: the requests meter's total (refusals are",
    'records, never billable). Lost: served calls without a billable record. Doubled: calls billed',
    'beyond what the origin ran. Overshoot: served calls past the limit. Stranded: allowance counted',
    'with no billable call behind it. API back: seconds until the restarted control plane answers',
    '`/healthz` (from the kill when it is restarted at once, else from the restart); more than',
    `${API_BACK_SECONDS} s fails the run.`,
    '',
    '| fault | served | refused | failed | 5xx | executed | recorded | billable | admitted | limit | lost | doubled | overshoot | stranded | client outage (s) | API back (s) | notes |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...rows.map(
      (r) =>
        `| ${r.fault} | ${r.clients.served} | ${r.clients.refused} | ${r.clients.failed} | ${r.clients.server_error} | ${r.executed || '–'} | ${r.recorded || '–'} | ${r.billable || '–'} | ${r.admitted || '–'} | ${r.limit || '–'} | ${r.lost} | ${doubled(r)} | ${r.overshoot} | ${r.stranded} | ${r.clientOutageSeconds.toFixed(1)} | ${r.apiBackSeconds?.toFixed(1) ?? '–'} | ${r.notes} |`,
    ),
    '',
  ];
  mkdirSync(args['results-dir'], { recursive: true });
  writeFileSync(join(args['results-dir'], 'faults.md'), lines.join('\n'));
  writeFileSync(join(args['results-dir'], 'faults.json'), `${JSON.stringify(rows, null, 2)}\n`);
  process.stdout.write(`${lines.join('\n')}\n`);
  const kinds = new Map<string, number>();
  for (const f of failures) {
    const kind = f.replace(/"id":\d+/, '"id":…').slice(0, 160);
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  for (const [kind, n] of kinds) log(`${n} × ${kind}`);
  const broken = rows.filter(
    (r) => r.lost > 0 || doubled(r) > 0 || r.overshoot > 0 || r.stranded > 0 || r.clients.server_error > 0,
  );
  if (broken.length > 0) {
    log(
      `lost or doubled calls, overshoot, stranded allowance or 5xx in: ${broken.map((r) => r.fault).join('; ')}`,
    );
    process.exitCode = 1;
  }
  const slow = rows.filter((r) => r.apiBackSeconds !== undefined && r.apiBackSeconds > API_BACK_SECONDS);
  if (slow.length > 0) {
    log(`API back later than ${API_BACK_SECONDS} s after: ${slow.map((r) => r.fault).join('; ')}`);
    process.exitCode = 1;
  }
}

async function main(): Promise<void> {
  // The build is made (or found up to date) once here, not by the first start a fault times.
  execFileSync(process.execPath, [join(root, 'deploy', 'build.mjs')], { stdio: 'ignore' });
  const only = new Set(args.only === '' ? [] : args.only.split(','));
  const wanted = (name: string) => only.size === 0 || only.has(name);
  const rows: Row[] = [];
  if (wanted('aio-kill')) {
    log('all-in-one SIGKILL');
    rows.push(await aioKill());
  }
  // The faults of the distributed stack, in the order they run on one stack.
  const stackFaults: Array<[string, string, (stack: Stack) => Promise<Row>]> = [
    ['proxy-kill', 'proxy SIGKILL', proxyKill],
    ['redis-stop', 'Redis stop', redisStop],
    ['pg-stop', 'PostgreSQL stop', pgStop],
    ['cp-kill', 'control plane SIGKILL', cpKill],
    ['redis-flush', 'Redis FLUSHALL and a full restart', redisFlush],
    ['kafka-kill', 'Kafka SIGKILL', kafkaKill],
    ['webhook-kill', 'control plane SIGKILL during webhook deliveries', webhookKill],
  ];
  const chosen = stackFaults.filter(([name]) => wanted(name));
  if (chosen.length > 0) {
    log('starting the distributed stack');
    const stack = await startStack();
    try {
      for (const [, label, run] of chosen) {
        log(label);
        rows.push(await run(stack));
      }
    } finally {
      await stopProc(stack.proxy);
      await stopProc(stack.cp);
      await stack.origin.close();
      await infra(stack.infraEnv, 'all', 'stop');
      startedInfra.delete(stack.infraEnv);
    }
  }
  report(rows);
}

// Stopped by a signal (Ctrl-C, a CI timeout): the servers infra.sh started run as daemons and
// would outlive this process, so they are stopped here before it exits.
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    log(`${signal}: stopping what this run started; logs kept in ${work}`);
    for (const proc of procs) proc.child.kill('SIGKILL');
    for (const env of startedInfra)
      try {
        execFileSync('bash', [join(root, 'deploy', 'infra.sh'), 'all', 'stop'], { env, stdio: 'ignore' });
      } catch {}
    process.exit(130);
  });

try {
  await main();
  rmSync(work, { recursive: true, force: true });
} catch (error) {
  log(`failed; logs kept in ${work}`);
  throw error;
} finally {
  for (const proc of [...procs]) await stopProc(proc, 'SIGKILL');
}
