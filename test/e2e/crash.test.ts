import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { processAlive } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { type EmbeddedService, embeddedService, type Service, waitHealthy } from '../helpers/processes';
import { startSeller } from '../helpers/seller';

/**
 * Issue 32's first fault: the all-in-one service (`deploy/serve.ts` on embedded defaults)
 * SIGKILLed while clients call tools, then started again. Reconciled exactly: every call a
 * client got an answer to is recorded (no more than the origin executed), the plan's limit is
 * never passed across the restart, and the embedded PostgreSQL the dead process left running is
 * stopped by the next start, so a clean stop leaves nothing behind.
 */
const LIMIT = 300;
const CLIENTS = 8;
/** The plan limit of the SDK limit-check case. */
const CHECK_LIMIT = 400;

describe('the all-in-one service killed under load', () => {
  let embedded: EmbeddedService;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let baseUrl: string;
  let proxyUrl: string;
  let service: Service;
  let origin: McpOrigin;

  const start = async () => {
    service = await embedded.start();
    await waitHealthy(proxyUrl, service);
  };
  /** A provider with a product, a free plan of `limit` calls, and a customer activated on it. */
  const seller = async (providerName: string, productName: string, limit: number, externalRef: string) => {
    const sold = await startSeller(
      { env, baseUrl },
      { provider: providerName, product: productName, plans: [{ name: 'Free', price: 0, limit }] },
    );
    const customer = await sold.api<{ reference: string }>('POST', '/v1/sdk/customers', { externalRef });
    const activated = await sold.api('POST', '/v1/sdk/activate', {
      customerRef: customer.body.reference,
      planRef: sold.plans.Free,
    });
    expect(activated.status).toBe(200);
    return { ...sold, customerRef: customer.body.reference };
  };
  const postmasterPid = () => {
    const file = join(dir, 'data', 'postgres', 'postmaster.pid');
    return existsSync(file) ? Number(readFileSync(file, 'utf8').split('\n')[0]) : undefined;
  };

  beforeAll(async () => {
    embedded = await embeddedService('crash');
    ({ dir, env, baseUrl, proxyUrl } = embedded);
    origin = await startMcpOrigin({ stateless: true });
    await start();
  }, 120_000);

  afterAll(async () => {
    await service?.stop();
    // A failed run may leave the killed process's PostgreSQL behind: it must not outlive the test.
    const left = postmasterPid();
    if (left !== undefined && processAlive(left)) process.kill(left, 'SIGQUIT');
    await origin?.close();
    embedded?.remove();
  });

  it('records every limit check it admitted, once, across a SIGKILL', async () => {
    // The SDK limit check answers once its record is in the control plane's spool; the records
    // reach the bus in batches. Killed under eight clients, the next start replays the spool
    // before it answers, so the counter (started from stored records) holds every admission.
    const { provider, productId, customerRef } = await seller('Checks Co', 'Checked', CHECK_LIMIT, 'checks');
    const check = async (consume: boolean) => {
      try {
        const answer = await apiClient(baseUrl, provider.sandboxKey)<{ withinLimits: boolean; used: number }>(
          'POST',
          '/v1/sdk/limits',
          { customerRef, productRef: productId, consume },
        );
        return answer.status === 200 ? answer.body : undefined;
      } catch {
        return undefined;
      }
    };

    let admitted1 = 0;
    let killed = false;
    const loops = Array.from({ length: CLIENTS }, async () => {
      while (!killed) {
        const answer = await check(true);
        if (answer?.withinLimits === true) admitted1++;
        else if (answer !== undefined) throw new Error('refused before the limit');
      }
    });
    while (admitted1 < 150) await new Promise((r) => setTimeout(r, 2));
    const exited = new Promise((resolve) => service.child.once('exit', resolve));
    process.kill(service.child.pid as number, 'SIGKILL');
    killed = true;
    await Promise.all(loops);
    await exited;

    await start();
    const recorded = (await check(false))?.used ?? -1;
    // Every admission a client was told of is recorded; at most the checks in flight at the kill
    // (admitted and spooled, their answers never sent) come on top.
    expect(recorded).toBeGreaterThanOrEqual(admitted1);
    expect(recorded).toBeLessThanOrEqual(admitted1 + CLIENTS);
    // Then eight clients at once up to the limit: exactly what was left is admitted.
    let admitted2 = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        for (;;) {
          const answer = await check(true);
          if (answer === undefined) throw new Error('a check failed after the restart');
          if (!answer.withinLimits) return;
          admitted2++;
        }
      }),
    );
    expect(recorded + admitted2).toBe(CHECK_LIMIT);
    expect((await check(false))?.used).toBe(CHECK_LIMIT);
  }, 240_000);

  it('records every served call, never passes the limit, and leaves no PostgreSQL orphan', async () => {
    const { provider, api, productId, customerRef, register } = await seller(
      'Crash Co',
      'Adder',
      LIMIT,
      'crash',
    );
    const server = await register(origin.url, { name: 'adder', defaultPlan: 'Free' });
    const token = await api<{ accessToken: string }>('POST', `/v1/sdk/customers/${customerRef}/tokens`, {});
    const used = async () =>
      (
        await apiClient(baseUrl, provider.sandboxKey)<{ used: number }>('POST', '/v1/sdk/limits', {
          customerRef,
          productRef: productId,
          consume: false,
        })
      ).body.used;

    /** One tools/call: served (an answer with a result), refused (the paywall), or failed. */
    let id = 0;
    let lastAnswer = '';
    const callTool = async (): Promise<'served' | 'refused' | 'failed'> => {
      try {
        const response = await fetch(server.mcpProxyUrl, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            authorization: `Bearer ${token.body.accessToken}`,
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: ++id,
            method: 'tools/call',
            params: { name: 'add', arguments: { a: 1, b: 2 } },
          }),
        });
        const text = await response.text();
        lastAnswer = `${response.status} ${text.slice(0, 300)}`;
        if (response.status !== 200) return 'failed';
        if (text.includes('dev.mcp-meter/paywall')) return 'refused';
        if (text.includes('"result"') && text.includes('"text":"3"')) return 'served';
        return 'failed';
      } catch (error) {
        lastAnswer = String(error);
        return 'failed';
      }
    };

    // Phase 1: clients call until the process is killed under them.
    let served1 = 0;
    let killed = false;
    const loops = Array.from({ length: CLIENTS }, async () => {
      while (!killed) {
        const outcome = await callTool();
        if (outcome === 'served') served1++;
        if (outcome === 'refused') throw new Error('refused before the limit');
      }
    });
    while (served1 < 100) await new Promise((r) => setTimeout(r, 5));
    const orphan = postmasterPid();
    expect(orphan).toBeDefined();
    const exited = new Promise((resolve) => service.child.once('exit', resolve));
    process.kill(service.child.pid as number, 'SIGKILL');
    killed = true;
    await Promise.all(loops);
    await exited;
    const executed1 = origin.calls.get('add') ?? 0;
    // The dead process's PostgreSQL outlived it.
    expect(processAlive(orphan as number)).toBe(true);

    await start();
    expect(readFileSync(service.logFile, 'utf8')).toContain('left running by a process that is gone');
    expect(processAlive(orphan as number)).toBe(false);
    const recorded1 = await used();
    // Lost: none. Every answered call is recorded, and nothing the origin did not run.
    expect(recorded1).toBeGreaterThanOrEqual(served1);
    expect(recorded1).toBeLessThanOrEqual(executed1);

    // Phase 2: call until the paywall; the restart handed back no spent allowance.
    let served2 = 0;
    for (;;) {
      const outcome = await callTool();
      if (outcome === 'served') served2++;
      else if (outcome === 'refused') break;
      else throw new Error(`a call failed after the restart: ${lastAnswer}`);
    }
    expect(recorded1 + served2).toBe(LIMIT);
    expect(served1 + served2).toBeLessThanOrEqual(LIMIT);
    expect(await used()).toBe(LIMIT);

    // A clean stop stops the PostgreSQL this run started (it had stopped the orphan).
    const own = postmasterPid();
    expect(own).toBeDefined();
    expect(await service.stop('SIGTERM')).toBe(0);
    expect(processAlive(own as number)).toBe(false);
  }, 240_000);
});
