import { type CallFacts, callRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { TeamService } from '../src/modules/team/service';

/**
 * Usage analytics (issue 63) over records in the real usage store (chdb), checked against a
 * reference this test computes on its own: every bucket, group and percentile, in a time zone
 * whose clocks change inside the range, with duplicates, another environment and another
 * provider that must not show.
 */
const clock = new MovableClock(new Date('2026-04-06T00:00:00.000Z'));
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

const FROM = '2026-03-20T00:00:00.000Z';
const TO = '2026-04-05T00:00:00.000Z';
const TOOLS = ['search', 'fetch', 'summarize'] as const;

/** A small deterministic generator, so a failure reproduces. */
function random(seed: number) {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/** The local date (YYYY-MM-DD) of an instant in a zone, by the platform's own formatting. */
const localDate = (iso: string, timeZone: string) =>
  new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(
    new Date(iso),
  );

async function seller(name: string) {
  const { sandboxKey, liveKey, provider } = await harness.controlPlane.providers.create({
    displayName: name,
  });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const live = injectClient(harness.controlPlane, liveKey);
  return { api, live, provider };
}

describe('usage analytics', () => {
  let providerId: string;
  let api: Awaited<ReturnType<typeof seller>>['api'];
  let live: Awaited<ReturnType<typeof seller>>['live'];
  const records: UsageRecord[] = [];
  const customers: string[] = [];
  const plans: { id: string; name: string }[] = [];

  beforeAll(async () => {
    const s = await seller('Analytics');
    providerId = s.provider.id;
    api = s.api;
    live = s.live;
    for (const ref of ['ada', 'bob', 'cyd'])
      customers.push((await api('POST', '/v1/sdk/customers', { externalRef: ref })).body.id);
    // Records carry the meter's id, as the proxy writes them.
    const meter = {
      providerId: s.provider.id,
      environment: 'sandbox' as const,
      meterRef: (await api('GET', '/v1/ui/meters/requests')).body.id as string,
      meterName: 'requests',
    };
    const liveMeter = (await live('GET', '/v1/ui/meters/requests')).body.id as string;
    // Two plans the calls were judged by (a call of a free tool was judged by none).
    const product = (await api('POST', '/v1/ui/products', { name: 'Analytics' })).body.id as string;
    for (const name of ['Starter', 'Scale'])
      plans.push({
        id: (
          await api('POST', `/v1/ui/products/${product}/plans`, {
            name,
            type: 'recurring',
            billingCycle: 'monthly',
            price: 900,
            currency: 'USD',
          })
        ).body.id as string,
        name,
      });
    expect(plans.map((p) => typeof p.id)).toEqual(['string', 'string']);
    const next = random(63);
    const span = Date.parse(TO) - Date.parse(FROM);
    for (let i = 0; i < 800; i++) {
      const at = new Date(Date.parse(FROM) + Math.floor(next() * span)).toISOString();
      const roll = next();
      const facts: CallFacts = {
        outcome:
          roll < 0.7
            ? 'success'
            : roll < 0.8
              ? 'error'
              : roll < 0.85
                ? 'upstream_error'
                : roll < 0.95
                  ? 'paywall'
                  : 'success',
        admitted: roll < 0.85,
        productId: 'prd_analytics',
        tool: TOOLS[Math.floor(next() * TOOLS.length)] as string,
        server: 'mcp_analytics',
        ...(roll < 0.85 ? { latencyMs: 5 + Math.floor(next() * 400) } : {}),
        ...(roll >= 0.95 ? { cancelled: true } : {}),
      };
      const plan = next();
      if (plan < 0.9) facts.planId = (plan < 0.6 ? plans[0]?.id : plans[1]?.id) as string;
      records.push(callRecord(meter, customers[Math.floor(next() * 3)] as string, at, facts));
    }
    // Usage reported through the API: no tool, a value of 2.5.
    records.push({
      ...callRecord(meter, customers[0] as string, '2026-03-29T12:00:00.000Z', {
        outcome: 'success',
        admitted: false,
        productId: null,
      }),
      properties: {},
      value: 2.5,
    });
    await harness.store.store.insert(records);
    // The same records again (a replay): counted once.
    await harness.store.store.insert(records.slice(0, 100));
    // What must not show: the live environment's and another provider's.
    const other = await seller('Elsewhere');
    await harness.store.store.insert([
      callRecord(
        { ...meter, environment: 'live', meterRef: liveMeter },
        customers[0] as string,
        '2026-03-25T10:00:00.000Z',
        {
          outcome: 'success',
          admitted: true,
          productId: null,
          tool: 'search',
        },
      ),
      callRecord({ ...meter, providerId: other.provider.id }, 'cus_x', '2026-03-25T10:00:00.000Z', {
        outcome: 'success',
        admitted: true,
        productId: null,
        tool: 'search',
      }),
    ]);
    // The closed slots rolled up, as ingest does: the answers below come from the rollups, and
    // from the raw records for the range's partial ends (ingest/test/usage-rollups.test.ts
    // checks the two agree slot by slot).
    expect(await harness.store.rollups?.roll()).toBeGreaterThan(1500);
  });

  it('counts calls, units and errors per tool and local day in Paris, across the clock change', async () => {
    const answer = await api(
      'GET',
      `/v1/ui/analytics/usage?from=${FROM}&to=${TO}&grain=day&timeZone=Europe/Paris&groupBy=tool`,
    );
    expect(answer.status).toBe(200);
    const body = answer.body as Json;
    // Local days that meet the range: 20 March (from 01:00 Paris, UTC+1) to 5 April (until
    // 02:00, UTC+2 by then).
    expect(body.buckets[0]).toEqual({ start: '2026-03-19T23:00:00.000Z', label: '2026-03-20' });
    expect(body.buckets.at(-1)).toEqual({ start: '2026-04-04T22:00:00.000Z', label: '2026-04-05' });
    expect(body.buckets).toHaveLength(17);
    // 29 March has 23 hours in Paris: the next day starts at 22:00 UTC, not 23:00.
    const march = (label: string) => body.buckets.find((b: Json) => b.label === label)?.start;
    expect(march('2026-03-29')).toBe('2026-03-28T23:00:00.000Z');
    expect(march('2026-03-30')).toBe('2026-03-29T22:00:00.000Z');
    const labels: string[] = body.buckets.map((b: Json) => b.label);
    const expected = new Map<string, { calls: number[]; errors: number[] }>();
    for (const r of records) {
      const key = (r.properties.tool as string | undefined) ?? '';
      const entry = expected.get(key) ?? { calls: labels.map(() => 0), errors: labels.map(() => 0) };
      const i = labels.indexOf(localDate(r.timestamp, 'Europe/Paris'));
      entry.calls[i] = (entry.calls[i] ?? 0) + 1;
      if (['error', 'upstream_error'].includes(r.properties.outcome as string))
        entry.errors[i] = (entry.errors[i] ?? 0) + 1;
      expected.set(key, entry);
    }
    expect(body.series.map((s: Json) => s.key).sort()).toEqual([...expected.keys()].sort());
    for (const s of body.series) {
      expect(s.calls).toEqual(expected.get(s.key)?.calls);
      expect(s.errors).toEqual(expected.get(s.key)?.errors);
    }
    expect(body.totals).toEqual({
      calls: records.length,
      units: String(records.length - 1 + 2.5),
      errors: records.filter((r) => ['error', 'upstream_error'].includes(r.properties.outcome as string))
        .length,
    });
    expect(body.other).toBeNull();
  });

  it('buckets hours, weeks and months, groups by outcome and customer, and keeps the largest groups', async () => {
    const hours = (
      await api(
        'GET',
        '/v1/ui/analytics/usage?from=2026-03-28T00:00:00Z&to=2026-03-30T00:00:00Z&grain=hour&timeZone=Europe/Paris',
      )
    ).body as Json;
    // 48 UTC hours, and Paris skipped 02:00 on the 29th: labels jump from 01:00 to 03:00.
    expect(hours.buckets).toHaveLength(48);
    const jump = hours.buckets.findIndex((b: Json) => b.label === '2026-03-29T01:00');
    expect(hours.buckets[jump + 1].label).toBe('2026-03-29T03:00');
    const inHours = records.filter(
      (r) => r.timestamp >= '2026-03-28T00:00:00Z' && r.timestamp < '2026-03-30T00:00:00Z',
    );
    expect(hours.series[0].calls).toEqual(
      hours.buckets.map(
        (b: Json) =>
          inHours.filter(
            (r) =>
              Date.parse(r.timestamp) - Date.parse(b.start) >= 0 &&
              Date.parse(r.timestamp) - Date.parse(b.start) < 3_600_000,
          ).length,
      ),
    );

    const weeks = (await api('GET', `/v1/ui/analytics/usage?from=${FROM}&to=${TO}&grain=week`)).body as Json;
    expect(weeks.buckets.map((b: Json) => b.label)).toEqual(['2026-03-16', '2026-03-23', '2026-03-30']);
    expect(weeks.series[0].calls.reduce((a: number, b: number) => a + b, 0)).toBe(records.length);
    const months = (
      await api('GET', `/v1/ui/analytics/usage?from=${FROM}&to=${TO}&grain=month&timeZone=America/New_York`)
    ).body as Json;
    expect(months.buckets).toEqual([
      { start: '2026-03-01T05:00:00.000Z', label: '2026-03-01' },
      { start: '2026-04-01T04:00:00.000Z', label: '2026-04-01' },
    ]);

    const outcomes = (
      await api('GET', `/v1/ui/analytics/usage?from=${FROM}&to=${TO}&groupBy=outcome&grain=month`)
    ).body as Json;
    const total = (key: string) => outcomes.series.find((s: Json) => s.key === key)?.totalCalls ?? 0;
    expect(total('cancelled')).toBe(records.filter((r) => r.properties.cancelled === true).length);
    expect(total('error')).toBe(
      records.filter((r) => ['error', 'upstream_error'].includes(r.properties.outcome as string)).length,
    );
    expect(total('paywall')).toBe(records.filter((r) => r.properties.outcome === 'paywall').length);
    expect(total('reported')).toBe(1);

    // The largest customer alone, the other two summed.
    const byCustomer = (
      await api('GET', `/v1/ui/analytics/usage?from=${FROM}&to=${TO}&groupBy=customer&grain=month&limit=1`)
    ).body as Json;
    const counts = customers.map((c) => records.filter((r) => r.customerRef === c).length);
    expect(byCustomer.series).toHaveLength(1);
    expect(byCustomer.series[0].totalCalls).toBe(Math.max(...counts));
    expect(byCustomer.other).toMatchObject({ groups: 2, totalCalls: records.length - Math.max(...counts) });
    // By plan, each named; calls judged by no plan under ''.
    const byPlan = (await api('GET', `/v1/ui/analytics/usage?from=${FROM}&to=${TO}&groupBy=plan&grain=month`))
      .body as Json;
    expect(
      Object.fromEntries(byPlan.series.map((s: Json) => [s.key, { name: s.name, calls: s.totalCalls }])),
    ).toEqual(
      Object.fromEntries(
        ['', ...plans.map((p) => p.id)].map((id) => [
          id,
          {
            name: plans.find((p) => p.id === id)?.name ?? null,
            calls: records.filter((r) => (r.properties.planId ?? '') === id).length,
          },
        ]),
      ),
    );
    // By environment: a key reads its own side only; a console session both, side by side.
    const sides = (body: Json) => Object.fromEntries(body.series.map((s: Json) => [s.key, s.totalCalls]));
    const byEnvironment = `/v1/ui/analytics/usage?from=${FROM}&to=${TO}&groupBy=environment&grain=month`;
    expect(sides((await api('GET', byEnvironment)).body)).toEqual({ sandbox: records.length });
    expect(sides((await live('GET', byEnvironment)).body)).toEqual({ live: 1 });
    await new TeamService(harness.pool, clock).addMember({
      providerId,
      email: 'analyst@example.com',
      role: 'viewer',
      password: 'a long enough password',
    });
    const signedIn = await harness.controlPlane.app.inject({
      method: 'POST',
      url: '/v1/console/sessions',
      payload: { email: 'analyst@example.com', password: 'a long enough password' },
    });
    expect(signedIn.statusCode).toBe(201);
    const cookie = String(signedIn.headers['set-cookie'] ?? '').split(';')[0] ?? '';
    const asMember = await harness.controlPlane.app.inject({
      method: 'GET',
      url: byEnvironment,
      headers: { cookie },
    });
    expect(sides(asMember.json())).toEqual({ sandbox: records.length, live: 1 });
    expect(asMember.json().totals.calls).toBe(records.length + 1);
    // A customer is one environment's: the two do not go together.
    const mixed = await api('GET', `${byEnvironment}&customerRef=ada`);
    expect(mixed.status).toBe(400);
    expect(mixed.body.errors[0]).toMatchObject({ path: '/groupBy' });
    // One customer's own, by externalRef.
    const ada = (await api('GET', `/v1/ui/analytics/usage?from=${FROM}&to=${TO}&grain=month&customerRef=ada`))
      .body as Json;
    expect(ada.totals.calls).toBe(counts[0]);
    // The live environment sees only its own record.
    expect(
      (await live('GET', `/v1/ui/analytics/usage?from=${FROM}&to=${TO}&grain=month`)).body.totals.calls,
    ).toBe(1);
  });

  it('answers each tool’s error rate, and latency percentiles within 1 % of the exact ones', async () => {
    const tools = (await api('GET', `/v1/ui/analytics/tools?from=${FROM}&to=${TO}`)).body as Json;
    expect(tools.data.map((t: Json) => t.tool).sort()).toEqual([...TOOLS].sort());
    for (const t of tools.data) {
      const mine = records.filter((r) => r.properties.tool === t.tool);
      const errors = mine.filter((r) =>
        ['error', 'upstream_error'].includes(r.properties.outcome as string),
      ).length;
      const latencies = mine
        .map((r) => r.properties.latencyMs)
        .filter((l): l is number => typeof l === 'number')
        .sort((a, b) => a - b);
      // The nearest rank; the answer is its bucket's value, within 1 % of it (docs/analytics.md).
      const at = (level: number) => latencies[Math.max(0, Math.ceil(level * latencies.length) - 1)] ?? 0;
      expect({ ...t, latencyMs: undefined }).toEqual({
        tool: t.tool,
        server: 'mcp_analytics',
        calls: mine.length,
        errors,
        errorRate: errors / mine.length,
        latencyMs: undefined,
      });
      for (const level of [0.5, 0.95, 0.99] as const) {
        const got = t.latencyMs[{ 0.5: 'p50', 0.95: 'p95', 0.99: 'p99' }[level]];
        expect(Math.abs(got - at(level))).toBeLessThanOrEqual(at(level) * 0.01);
      }
    }
  });

  it('refuses what it cannot answer by name, with the limit', async () => {
    const refused = async (query: string) =>
      (await api('GET', `/v1/ui/analytics/usage?${query}`)).body as Json;
    const yearOfHours = await refused('from=2025-04-01T00:00:00Z&to=2026-04-01T00:00:00Z&grain=hour');
    expect(yearOfHours).toMatchObject({ status: 400, code: 'range_too_large', limit: 1000, grain: 'hour' });
    expect((await refused('grain=minute')).errors[0]).toMatchObject({
      path: '/grain',
      message: expect.stringContaining('minute'),
    });
    expect((await refused('groupBy=colour')).errors[0]).toMatchObject({
      path: '/groupBy',
      message: expect.stringContaining('colour'),
    });
    expect((await refused('timeZone=Mars/Olympus_Mons')).errors[0]).toMatchObject({
      path: '/timeZone',
      message: 'is not an IANA time zone: Mars/Olympus_Mons',
    });
    expect((await refused(`from=${TO}&to=${FROM}`)).code).toBe('validation_failed');
    expect((await refused('customerRef=nobody')).code).toBe('customer_not_found');
    expect((await refused('meterRef=nope')).code).toBe('meter_not_found');
    expect((await refused('from=0001-01-01T00:00:00Z&to=0001-01-02T00:00:00Z')).errors[0]).toMatchObject({
      path: '/from',
      message: 'must be a time between 1970 and 2200',
    });
    expect((await refused('to=9999-12-31T00:00:00Z')).errors.map((e: Json) => e.path)).toEqual([
      '/from',
      '/to',
    ]);
    expect((await refused('from=yesterday')).code).toBe('validation_failed');
    expect((await refused('limit=0')).code).toBe('validation_failed');
  });
});
