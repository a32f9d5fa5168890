import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type ConformanceResults, conformanceRunner, failures, passed } from '../helpers/conformance';
import { type ConformanceOrigin, startConformanceOrigin } from '../helpers/conformance-origin';
import { conformanceStack } from '../helpers/conformance-stack';
import { pollUntil } from '../helpers/poll';

/** The tasks extension: the SDK v2 has no task runtime, so the origin cannot pass it directly. */
const isExtension = (scenario: string) => scenario.startsWith('tasks-');

/**
 * The official MCP conformance suite, server side, for both protocol eras: first against a test
 * origin on the TypeScript SDK v2 directly, then against the same origin through the proxy.
 * Every scenario the direct run passes must pass through the proxy too, by way of the relay
 * that adds the customer's token (test/helpers/conformance-stack.ts).
 */
describe('the MCP conformance suite, directly and through the proxy', () => {
  const infra = inject('infra');
  let stack: Awaited<ReturnType<typeof conformanceStack>>;
  let origin: ConformanceOrigin;
  let relayUrl: string;
  let api: Awaited<ReturnType<typeof conformanceStack>>['api'];
  let customerRef: string;
  let suite: Awaited<ReturnType<typeof conformanceRunner>>['server'];

  beforeAll(async () => {
    suite = (await conformanceRunner()).server;
    stack = await conformanceStack('conformance', infra);
    api = stack.api;
    origin = await startConformanceOrigin();
    ({ relayUrl, customerRef } = await stack.proxied(origin.url));
  });

  afterAll(async () => {
    await stack?.close();
    await origin?.close();
  });

  /** Scenarios the direct run passes that the proxied run does not. */
  const lostThroughProxy = (direct: ConformanceResults, proxied: ConformanceResults) =>
    [...direct]
      .filter(([, checks]) => passed(checks))
      .filter(([scenario]) => !passed(proxied.get(scenario) ?? []));

  it.each([
    ['2025-11-25', ['--spec-version', '2025-11-25']],
    // Everything the 2026-07-28 revision requires (stateless serving, multi-round results,
    // caching hints), plus its pending scenarios and the tasks extension, which are reported.
    ['2026-07-28', ['--requirements', '2026-07-28']],
  ])(
    'MCP %s: every scenario the origin passes directly also passes through the proxy',
    async (_era, selection) => {
      const direct = await suite(origin.url, selection);
      const directFailures = [...direct.keys()].filter((scenario) => !isExtension(scenario));
      expect(direct.size).toBeGreaterThan(30);
      expect(failures(direct, directFailures)).toEqual([]);

      const proxied = await suite(relayUrl, selection);
      const lost = lostThroughProxy(direct, proxied).map(([scenario]) => scenario);
      expect(lost, failures(proxied, lost).join('\n')).toEqual([]);
      expect([...proxied.keys()].sort()).toEqual([...direct.keys()].sort());
    },
  );

  it('metered the tool calls the suite made through the proxy, with multi-round input rounds not billable', async () => {
    const usage = await pollUntil(
      async () =>
        (
          await api<{ total: number; groups?: Array<{ value: string; records: number }> }>(
            'GET',
            `/ui/meters/requests/usage?customerRef=${customerRef}&groupBy=outcome`,
          )
        ).body,
      (body) => {
        const records = (outcome: string) =>
          body.groups?.find((group) => group.value === outcome)?.records ?? 0;
        return records('success') > 20 && records('input_required') > 5;
      },
      { what: "the suite's tool calls on the requests meter" },
    );
    const byOutcome = new Map((usage.groups ?? []).map((group) => [group.value, group.records]));
    expect(byOutcome.get('success')).toBeGreaterThan(20);
    expect(byOutcome.get('input_required')).toBeGreaterThan(5);
    // The total is what can be billed: admitted calls only, never the input rounds.
    const inputRounds = byOutcome.get('input_required') ?? 0;
    const all = [...byOutcome.values()].reduce((sum, records) => sum + records, 0);
    expect(usage.total).toBeLessThanOrEqual(all - inputRounds);
  });
});
