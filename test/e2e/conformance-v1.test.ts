import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type ConformanceResults, conformanceRunner, failures, passed } from '../helpers/conformance';
import { conformanceStack } from '../helpers/conformance-stack';
import { pollUntil } from '../helpers/poll';
import { root } from '../helpers/processes';

/**
 * Scenarios in which the server sends a request to the client from inside a tool. The SDK v1
 * reference server sends them on the session's standalone GET stream (no related request id),
 * so each passes only when the GET reached the origin before the tool call the client sent
 * after it: through the proxy they failed in 1 to 12 runs of 40 before issue 58.
 */
const ORDER_SENSITIVE = [
  'tools-call-elicitation',
  'elicitation-sep1034-defaults',
  'elicitation-sep1330-enums',
  'tools-call-sampling',
];
/** Runs of each of those, directly and through the proxy: ten CI runs' worth, in one job. */
const REPEATS = Number(process.env.CONFORMANCE_REPEATS ?? 10);
/** Runs of the whole suite through the proxy (about 3 s each). */
const FULL_RUNS = Number(process.env.CONFORMANCE_FULL_RUNS ?? 5);

/**
 * The conformance suite, release 0.1.16 and 0.2.0-alpha.12 (its 2025-11-25 scenarios), against
 * the conformance repository's own reference server of 0.1.16 (test/origins/conformance-everything,
 * on the MCP SDK v1), directly and through the proxy: every scenario the direct run passes passes
 * through the proxy, and the scenarios that depend on the session's request order pass every
 * time, in many runs.
 */
describe('the MCP conformance suites against the SDK v1 reference server', () => {
  const infra = inject('infra');
  let stack: Awaited<ReturnType<typeof conformanceStack>>;
  let origin: ChildProcess | undefined;
  let originUrl: string;
  let relayUrl: string;
  let customerRef: string;
  type Suite = Awaited<ReturnType<typeof conformanceRunner>>['server'];
  /** Each release, with the selection that runs its MCP 2025-11-25 scenarios. */
  const suites = new Map<string, { run: Suite; selection: string[] }>();

  beforeAll(async () => {
    suites.set('0.1.16', { run: (await conformanceRunner('0.1.16')).server, selection: [] });
    suites.set('0.2.0-alpha.12', {
      run: (await conformanceRunner()).server,
      selection: ['--spec-version', '2025-11-25'],
    });
    const port = await freePort();
    originUrl = `http://127.0.0.1:${port}/mcp`;
    origin = spawn(
      process.execPath,
      [
        '--import',
        './deploy/loader.mjs',
        join('test', 'origins', 'conformance-everything', 'everything-server.ts'),
      ],
      { cwd: root, env: { ...process.env, PORT: String(port) }, stdio: 'ignore' },
    );
    stack = await conformanceStack('conformance-v1', infra);
    await pollUntil(
      async () => (await fetch(originUrl, { method: 'GET' }).catch(() => undefined))?.status ?? 0,
      (status) => status > 0,
      { what: 'the reference everything-server listening', timeoutMs: 30_000 },
    );
    ({ relayUrl, customerRef } = await stack.proxied(originUrl));
  });

  afterAll(async () => {
    origin?.kill();
    await stack?.close();
  });

  /** Scenarios the direct run passes that the proxied run does not. */
  const lost = (direct: ConformanceResults, proxied: ConformanceResults) =>
    [...direct.keys()].filter(
      (scenario) => passed(direct.get(scenario) ?? []) && !passed(proxied.get(scenario) ?? []),
    );

  it.each(['0.1.16', '0.2.0-alpha.12'])(
    'suite %s: passes through the proxy every scenario it passes directly',
    async (version) => {
      const { run, selection } = suites.get(version) as { run: Suite; selection: string[] };
      const direct = await run(originUrl, selection);
      // The 0.1.16 release's active server scenarios for 2025-11-25: 30.
      expect(direct.size).toBeGreaterThanOrEqual(30);
      const directPassed = [...direct.keys()].filter((scenario) => passed(direct.get(scenario) ?? []));
      // The reference server passes its own release's whole suite (40 checks in 30 scenarios).
      if (version === '0.1.16') expect(directPassed.length, failures(direct).join('\n')).toBe(direct.size);
      for (const scenario of ORDER_SENSITIVE) expect(directPassed).toContain(scenario);
      // The whole suite, several times: one run in two lost an elicitation scenario through the
      // proxy when a client's first call raced its GET stream (session-order.ts, STREAM_GRACE_MS).
      for (let round = 1; round <= FULL_RUNS; round++) {
        const proxied = await run(relayUrl, selection);
        const missing = lost(direct, proxied);
        expect(missing, `run ${round}: ${failures(proxied, missing).join('\n')}`).toEqual([]);
        expect([...proxied.keys()].sort()).toEqual([...direct.keys()].sort());
      }
    },
  );

  it.each(['0.1.16', '0.2.0-alpha.12'])(
    `suite %s: passes the scenarios that depend on request order ${REPEATS} times out of ${REPEATS}, directly and through the proxy`,
    async (version) => {
      const { run, selection } = suites.get(version) as { run: Suite; selection: string[] };
      const failed: string[] = [];
      for (let round = 0; round < REPEATS; round++) {
        for (const scenario of ORDER_SENSITIVE) {
          for (const [where, url] of [
            ['direct', originUrl],
            ['proxied', relayUrl],
          ] as const) {
            const results = await run(url, [...selection, '--scenario', scenario]);
            if (!passed(results.get(scenario) ?? []))
              failed.push(
                `${where} run ${round + 1}: ${failures(results).join('; ') || `${scenario}: no result`}`,
              );
          }
        }
      }
      expect(failed).toEqual([]);
    },
    // Four suite processes a scenario and round: on two busy cores (the whole suite in parallel)
    // ten rounds outlast the default two minutes; a ceiling, not a measure.
    REPEATS * 30_000,
  );

  it('metered the tool calls the suite made through the proxy, one record each', async () => {
    // Each proxied run of an order-sensitive scenario makes one tool call, each full suite a dozen.
    const usage = await pollUntil(
      async () =>
        (
          await stack.api<{ groups?: Array<{ value: string; records: number }> }>(
            'GET',
            `/ui/meters/requests/usage?customerRef=${customerRef}&groupBy=outcome`,
          )
        ).body,
      (body) =>
        (body.groups?.find((group) => group.value === 'success')?.records ?? 0) >=
        2 * (REPEATS * ORDER_SENSITIVE.length + 10 * FULL_RUNS),
      { what: "the suite's tool calls on the requests meter" },
    );
    const byOutcome = new Map((usage.groups ?? []).map((group) => [group.value, group.records]));
    expect(byOutcome.get('success')).toBeGreaterThanOrEqual(
      2 * (REPEATS * ORDER_SENSITIVE.length + 10 * FULL_RUNS),
    );
    expect(byOutcome.get('upstream_error') ?? 0).toBe(0);
  });
});
