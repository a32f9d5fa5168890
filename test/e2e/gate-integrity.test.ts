import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { apiClient } from '../helpers/api';
import { type DecoderOrigin, startGoOrigin, startPythonOrigin } from '../helpers/decoder-origins';
import { suffix } from '../helpers/flows';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { pollUntil } from '../helpers/poll';
import { rawExchange, rawRequest } from '../helpers/raw-http';
import { fuzzCases, startFuzzOrigin, valueAsRead, valuesOf } from '../helpers/request-fuzz';
import { type SplitStack, startSeller, startSplitStack } from '../helpers/seller';

/**
 * Issue 57's attacks, against the split stack (control plane, ingest, proxy as processes, real
 * PostgreSQL, Redis, Kafka, ClickHouse) in front of origins whose decoders nobody here wrote: Go's
 * encoding/json (case-insensitive field names), Python's json, and the MCP TypeScript SDK. A
 * customer at its plan's limit of 3 sends every smuggling and parser-differential trick; each is
 * refused before anything is dialled, no origin runs a fourth call, and what each origin ran
 * equals the usage records of outcome `success` for its customer.
 */

interface Target {
  name: string;
  subdomain: string;
  token: string;
  customerRef: string;
  /** Tool calls the origin ran, and request lines it was sent (none from the SDK origin). */
  ran(): Promise<number>;
  lines(): Promise<string[] | undefined>;
  basePath: string;
}

const call = (id: number, extra = '') =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}${extra}}`;

describe('the gate: an origin runs only what the proxy judged and metered', () => {
  const infra = inject('infra');
  let stack: SplitStack;
  let proxyPort: number;
  let api: ReturnType<typeof apiClient>;
  let go: DecoderOrigin;
  let python: DecoderOrigin;
  let sdk: McpOrigin;
  const targets: Target[] = [];
  let fuzzOrigin: Awaited<ReturnType<typeof startFuzzOrigin>>;
  let fuzzTarget: Target;

  const headers = (target: Target, extra: Array<[string, string]> = []): Array<[string, string]> => [
    ['host', `127.0.0.1:${proxyPort}`],
    ['content-type', 'application/json'],
    ['accept', 'application/json, text/event-stream'],
    ['authorization', `Bearer ${target.token}`],
    ...extra,
  ];
  const send = (target: Target, body: string, extra: Array<[string, string]> = [], path = '') =>
    rawExchange(
      proxyPort,
      rawRequest('POST', `/mcp/${target.subdomain}${path}`, headers(target, extra), body),
    );

  beforeAll(async () => {
    stack = await startSplitStack({
      name: 'gate',
      infra,
      secretKey: 'ab'.repeat(32),
      logLevel: 'error',
      proxy: { EMITTER_LINGER_MS: '20' },
    });
    proxyPort = stack.proxyPort;
    [go, python, sdk, fuzzOrigin] = await Promise.all([
      startGoOrigin(),
      startPythonOrigin(),
      startMcpOrigin({ stateless: true, json: true }),
      startFuzzOrigin(),
      stack.ready,
    ]);
    const seller = await startSeller(stack, {
      provider: 'Gate Co',
      product: 'Gated',
      plans: [
        { name: 'Three calls', price: 0, limit: 3 },
        { name: 'Roomy', price: 0, limit: 10_000_000 },
      ],
    });
    api = seller.api;
    const origins: Array<[string, string, () => Promise<number>, () => Promise<string[] | undefined>]> = [
      [
        'go',
        `${go.url}/mcp`,
        async () => Object.values((await go.report()).ran).reduce((a, b) => a + b, 0),
        async () => (await go.report()).lines,
      ],
      [
        'python',
        `${python.url}/mcp`,
        async () => Object.values((await python.report()).ran).reduce((a, b) => a + b, 0),
        async () => (await python.report()).lines.filter((l) => l !== 'GET /__report'),
      ],
      ['sdk', sdk.url, async () => sdk.calls.get('add') ?? 0, async () => undefined],
    ];
    origins.push(['fuzz', fuzzOrigin.url, async () => fuzzOrigin.toolCalls(), async () => undefined]);
    for (const [name, url, ran, lines] of origins) {
      const server = await seller.register(url, {
        name: `gate-${name}-${suffix()}`,
        defaultPlan: name === 'fuzz' ? 'Roomy' : 'Three calls',
      });
      const customer = (await api<{ reference: string }>('POST', '/v1/sdk/customers', {})).body;
      const token = (
        await api<{ accessToken: string }>('POST', `/v1/sdk/customers/${customer.reference}/tokens`, {})
      ).body.accessToken;
      targets.push({
        name,
        subdomain: server.subdomain,
        token,
        customerRef: customer.reference,
        ran,
        lines,
        basePath: new URL(url).pathname,
      });
    }
    fuzzTarget = targets.find((t) => t.name === 'fuzz') as Target;
  }, 600_000);

  afterAll(async () => {
    await stack?.stop();
    await Promise.all([go?.close(), python?.close(), sdk?.close(), fuzzOrigin?.close()]);
  });

  /** The records of outcome success of a customer once they number `count`. */
  const successes = async (customerRef: string, count: number) => {
    const body = await pollUntil(
      async () =>
        (
          await api<{ records: number; groups?: Array<{ value: string; records: number }> }>(
            'GET',
            `/ui/meters/requests/usage?customerRef=${customerRef}&groupBy=outcome`,
          )
        ).body,
      (b) => (b.groups ?? []).find((g) => g.value === 'success')?.records === count,
      { what: `${count} success records of ${customerRef}`, timeoutMs: 30_000 },
    );
    return (body.groups ?? []).find((g) => g.value === 'success')?.records;
  };

  /** Each attack: the bytes, and the refusal the proxy answers (its machine code). */
  const attacks = (t: Target): Array<{ what: string; send: () => ReturnType<typeof send>; code: string }> => {
    // U+010D U+010A: Latin-1 would have written "\r\n" and the rest as a second request.
    const crlf = '\u010d\u010a';
    const smuggled = `${crlf}POST${' '}/mcp${' '}HTTP/1.1${crlf}host:${' '}x${crlf}content-length:${' '}90${crlf}${crlf}${call(99)}`;
    const modern: Array<[string, string]> = [
      ['mcp-protocol-version', '2026-07-28'],
      ['mcp-method', 'tools/call'],
      ['mcp-name', 'add'],
    ];
    const deep = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    return [
      {
        what: 'CRLF in the path',
        send: () => send(t, call(21), [], `/x${smuggled.replaceAll(' ', '\u0120')}`),
        code: 'invalid_request_target',
      },
      {
        what: 'CRLF in the query',
        send: () => send(t, call(22), [], `?q=${crlf}x:${crlf}`),
        code: 'invalid_request_target',
      },
      {
        what: 'CRLF in a GET path',
        send: () =>
          rawExchange(
            proxyPort,
            rawRequest('GET', `/mcp/${t.subdomain}/${crlf}DELETE${'\u0120'}/`, headers(t)),
          ),
        code: 'invalid_request_target',
      },
      {
        what: 'an encoded CR LF',
        send: () => send(t, call(23), [], '/a%0d%0aX'),
        code: 'invalid_request_target',
      },
      {
        what: 'Method in another case',
        send: () =>
          send(
            t,
            '{"jsonrpc":"2.0","id":31,"Method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}',
          ),
        code: 'ambiguous_key',
      },
      {
        what: 'ping, then METHOD',
        send: () =>
          send(
            t,
            '{"jsonrpc":"2.0","id":32,"method":"ping","METHOD":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}',
          ),
        code: 'ambiguous_key',
      },
      {
        what: 'name, then Name',
        send: () =>
          send(t, '{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"free","Name":"add"}}'),
        code: 'ambiguous_key',
      },
      {
        what: 'params with a long s',
        send: () =>
          send(
            t,
            '{"jsonrpc":"2.0","id":34,"method":"tools/list","paramſ":{"name":"add"},"METHOD":"tools/call"}',
          ),
        code: 'ambiguous_key',
      },
      {
        what: 'method twice',
        send: () =>
          send(t, '{"jsonrpc":"2.0","id":35,"method":"tools/call","method":"ping","params":{"name":"add"}}'),
        code: 'duplicate_key',
      },
      {
        what: 'a batch hiding a folded key',
        send: () =>
          send(
            t,
            `[{"jsonrpc":"2.0","id":36,"method":"ping"},{"jsonrpc":"2.0","id":37,"method":"ping","mEthod":"tools/call","params":{"name":"add"}}]`,
          ),
        code: 'ambiguous_key',
      },
      {
        what: 'a 2026-07-28 retry with arguments 100,000 deep',
        send: () =>
          send(
            t,
            `{"jsonrpc":"2.0","id":38,"method":"tools/call","params":{"name":"add","arguments":${deep},"inputResponses":{"checkout":{"action":"accept"}},"requestState":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
            modern,
          ),
        code: 'too_deep',
      },
      // (uWebSockets.js itself ends a header value at its first byte past ASCII: docs/proxy.md.)
      {
        what: 'a header value with DEL',
        send: () => send(t, call(39), [['x-note', 'a\u007fb']]),
        code: 'invalid_header',
      },
      {
        what: 'Mcp-Method twice',
        send: () =>
          send(t, call(40), [
            ['mcp-method', 'tools/list'],
            ['mcp-method', 'tools/call'],
          ]),
        code: 'duplicate_header',
      },
    ];
  };

  for (const name of ['go', 'python', 'sdk'] as const) {
    it(`${name} origin: a customer at its limit of 3 gets nothing more run, whatever the bytes`, async () => {
      const t = targets.find((x) => x.name === name) as Target;
      for (let i = 1; i <= 3; i++) {
        const served = await send(t, call(i));
        expect(served.status, served.body).toBe(200);
        expect(served.body).toMatch(/"result"/);
        expect(served.body).not.toMatch(/isError/);
      }
      expect(await t.ran()).toBe(3);
      const paywalled = await send(t, call(4));
      expect(paywalled.status).toBe(200);
      expect(JSON.parse(paywalled.body)).toMatchObject({ id: 4, result: { isError: true } });

      for (const attack of attacks(t)) {
        const answer = await attack.send();
        expect(answer.status, `${attack.what}: ${answer.body}`).toBe(400);
        const parsed = JSON.parse(answer.body) as { code?: string; error?: { data?: { code?: string } } };
        expect(parsed.code ?? parsed.error?.data?.code, attack.what).toBe(attack.code);
      }
      expect(await t.ran()).toBe(3);
      // Nothing was smuggled: every request the origin was sent is a plain POST to its path.
      const lines = await t.lines();
      if (lines !== undefined) expect(new Set(lines)).toEqual(new Set([`POST ${t.basePath}`]));

      // The invariant: the calls the origin ran are the usage records of outcome success.
      const records = await pollUntil(
        async () =>
          (
            await api<{ records: number; groups?: Array<{ value: string; records: number }> }>(
              'GET',
              `/ui/meters/requests/usage?customerRef=${t.customerRef}&groupBy=outcome`,
            )
          ).body,
        (body) => body.records >= 4,
        { what: `the records of ${name}'s customer`, timeoutMs: 30_000 },
      );
      const byOutcome = Object.fromEntries((records.groups ?? []).map((g) => [g.value, g.records]));
      expect(byOutcome).toEqual({ success: 3, paywall: 1 });
      expect(byOutcome.success).toBe(await t.ran());
    });
  }

  const runs = Number(process.env.GATE_FUZZ_RUNS ?? 3_000);
  it(
    'a differential fuzzer: the origin gets exactly what the proxy judged, or nothing',
    async () => {
      let n = 0;
      let forwarded = 0;
      await fc.assert(
        fc.asyncProperty(fuzzCases, async (c) => {
          const label = `case-${++n}`;
          const sent: Array<[string, string]> = [...headers(fuzzTarget), ['x-case', label], ...c.headers];
          const body = c.method === 'POST' ? c.body : '';

          const answer = await rawExchange(
            proxyPort,
            rawRequest(c.method, `/mcp/${fuzzTarget.subdomain}${c.suffix}`, sent, body),
          );
          expect(answer.status, answer.body).toBeLessThan(500);
          const got = fuzzOrigin.received.get(label) ?? [];
          expect(got.length).toBeLessThanOrEqual(1);
          const seen = got[0];
          if (seen === undefined) {
            // Refused by the proxy (or closed by its HTTP parser), never answered as if served.
            expect(answer.status === 0 || answer.status >= 400, answer.head).toBe(true);
            return;
          }
          forwarded++;
          expect(seen.method).toBe(c.method);
          expect(seen.url).toBe(`/base${c.suffix}`);
          const byName = new Map<string, string[]>();
          for (const [name, value] of c.headers)
            byName.set(name.toLowerCase(), [...(byName.get(name.toLowerCase()) ?? []), valueAsRead(value)]);
          for (const [name, values] of byName)
            expect(valuesOf(seen, name), name).toEqual([values.join(name === 'cookie' ? '; ' : ', ').trim()]);
          expect(seen.body.equals(Buffer.from(body, 'utf8')), seen.body.toString('utf8')).toBe(true);
        }),
        { numRuns: runs },
      );
      // What the proxy's HTTP parser refuses by going silent (so the fuzzer leaves it out): a name
      // that is no token, a control character in a value, a space or tab in the target.
      const silent: Array<[string, string, Array<[string, string]>]> = [
        ['bad name', '', [['x(bad)', 'a']]],
        ['__proto__', '', [['__proto__', 'a']]],
        ['SOH in a value', '', [['x-a', 'a\u0001b']]],
        ['a space in the target', '/a b', []],
        ['a tab in the target', '/a\tb', []],
      ];
      for (const [what, suffix, extra] of silent) {
        const label = `silent-${what}`;
        const sent: Array<[string, string]> = [...headers(fuzzTarget), ['x-case', label], ...extra];
        const answer = await rawExchange(
          proxyPort,
          rawRequest('POST', `/mcp/${fuzzTarget.subdomain}${suffix}`, sent, call(1)),
          1_500,
        );
        expect(answer.status === 0 || answer.status >= 400, what).toBe(true);
        expect(fuzzOrigin.received.has(label), what).toBe(false);
      }
      // No request the proxy did not mean to send, none the origin could not parse.
      expect(fuzzOrigin.unlabelled).toEqual([]);
      expect(fuzzOrigin.parseErrors).toEqual([]);
      expect([...fuzzOrigin.received.values()].reduce((sum, list) => sum + list.length, 0)).toBe(forwarded);
      // Not a fuzzer that only meets refusals.
      expect(forwarded).toBeGreaterThan(runs / 5);
      // The invariant after the fuzzer: the tool calls the origin ran are the success records.
      expect(await successes(fuzzTarget.customerRef, fuzzOrigin.toolCalls())).toBe(fuzzOrigin.toolCalls());
      // About 1.3 ms a case here; `npm run fuzz:proxy` runs 50,000.
    },
    Math.max(120_000, runs * 10),
  );
});
