import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '@mcp-meter/contracts/kit';
import { pollUntil } from './poll';
import { root } from './processes';

const run = promisify(execFile);

/** One request as it reached stripe-mock: what the service sent Stripe. */
export interface StripeRequest {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  /** The form body, flattened as Stripe encodes it (`metadata[purchase]`, …). */
  params: Record<string, string>;
  status: number;
}

export interface StripeMock {
  /** The URL to give the service as STRIPE_API_URL (a recording relay in front of the mock). */
  url: string;
  requests: StripeRequest[];
  /** stripe-mock's fixtures as it ships them, by resource (`refund`, `dispute`, `payout`, …). */
  fixtures: Record<string, Record<string, unknown>>;
  close(): Promise<void>;
}

/**
 * stripe-mock on a free loopback port, behind a relay that records every request the service
 * makes. stripe-mock checks each request against Stripe's OpenAPI spec and answers with its
 * fixtures; it is stateless, so what a payment comes to is a fixture: by default its
 * PaymentIntent is `requires_payment_method` (a refused card); `payments: 'succeed'` answers
 * `succeeded` (and SetupIntents hold a card), and `refunds: 'pending'` leaves refunds pending, from a copy of its own fixtures.
 */
export async function startStripeMock(
  options: { payments?: 'succeed' | 'refused'; refunds?: 'pending' | 'succeeded' } = {},
): Promise<StripeMock> {
  const { stdout } = await run('bash', [join(root, 'test', 'stripe', 'install.sh')], { timeout: 600_000 });
  const dir = stdout.trim();
  const work = mkdtempSync(join(tmpdir(), 'stripe-mock-'));
  const shipped = readFileSync(join(dir, 'fixtures3.json'), 'utf8');
  const fixtures = JSON.parse(shipped) as { resources: Record<string, Record<string, unknown>> };
  if (options.payments === 'succeed') {
    Object.assign(fixtures.resources.payment_intent ?? {}, { status: 'succeeded', last_payment_error: null });
    // A Checkout Session in setup mode completes with a SetupIntent holding the card it saved.
    Object.assign(fixtures.resources.setup_intent ?? {}, {
      status: 'succeeded',
      payment_method: 'pm_card_visa',
    });
  }
  if (options.refunds === 'pending') Object.assign(fixtures.resources.refund ?? {}, { status: 'pending' });
  const fixturesFile = join(work, 'fixtures.json');
  writeFileSync(fixturesFile, JSON.stringify(fixtures));

  const mockPort = await freePort();
  // It serves HTTPS too, on a fixed default port unless told: both on free loopback ports.
  const child = spawn(
    join(dir, 'bin', 'stripe-mock'),
    [
      '-http-addr',
      `127.0.0.1:${mockPort}`,
      '-https-addr',
      `127.0.0.1:${await freePort()}`,
      '-fixtures',
      fixturesFile,
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));

  const requests: StripeRequest[] = [];
  const relay = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const body = Buffer.concat(chunks);
      const forward = httpRequest(
        {
          host: '127.0.0.1',
          port: mockPort,
          method: incoming.method,
          path: incoming.url,
          headers: { ...incoming.headers, host: `127.0.0.1:${mockPort}` },
        },
        (answer) => {
          const key = incoming.headers['idempotency-key'];
          requests.push({
            method: incoming.method ?? '',
            path: (incoming.url ?? '').split('?')[0] ?? '',
            idempotencyKey: Array.isArray(key) ? key[0] : key,
            params: Object.fromEntries(new URLSearchParams(body.toString('utf8'))),
            status: answer.statusCode ?? 0,
          });
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(outgoing);
        },
      );
      forward.on('error', () => outgoing.writeHead(502).end());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
  await pollUntil(
    async () => {
      const answer = await fetch(`http://127.0.0.1:${mockPort}/v1/account`, {
        headers: { authorization: 'Bearer sk_test_ready' },
      }).catch(() => undefined);
      return answer?.ok === true;
    },
    (ready) => ready,
    { timeoutMs: 20_000, what: 'stripe-mock to answer' },
  );
  return {
    url,
    requests,
    fixtures: (JSON.parse(shipped) as typeof fixtures).resources,
    async close() {
      await new Promise<void>((resolve) => relay.close(() => resolve()));
      child.kill('SIGTERM');
      await exited;
      rmSync(work, { recursive: true, force: true });
    },
  };
}
