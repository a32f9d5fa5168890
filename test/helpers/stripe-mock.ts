import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
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
  /** The id of the object Stripe answered with, if it answered one. */
  answered: string | undefined;
}

export type PaymentsAnswer = 'succeed' | 'refused';

export interface StripeMock {
  /** The URL to give the service as STRIPE_API_URL (a recording relay in front of the mock). */
  url: string;
  requests: StripeRequest[];
  /** stripe-mock's fixtures as it ships them, by resource (`refund`, `dispute`, `payout`, …). */
  fixtures: Record<string, Record<string, unknown>>;
  /** What the card payments made from now on come to. */
  payments(answer: PaymentsAnswer): void;
  /**
   * Stripe stops answering (true): requests from now on wait at the relay, unanswered, until
   * `hold(false)` sends them on (Stripe recovers).
   */
  hold(on: boolean): void;
  /** Requests waiting at the relay while held. */
  readonly held: number;
  /**
   * The next request to `path` is refused as Stripe refuses one its account's state does not
   * allow (stripe-mock, stateless, accepts it): 400 with Stripe's `error` object of `code`. It is
   * recorded, and not sent on.
   */
  refuseNext(path: string, code: string, message: string): void;
  close(): Promise<void>;
}

type Fixtures = { resources: Record<string, Record<string, unknown>> };

/**
 * stripe-mock on free loopback ports, behind a relay that records every request the service
 * makes. stripe-mock checks each request against Stripe's OpenAPI spec and answers with its
 * fixtures. It is stateless, so what a payment comes to is a fixture: its own PaymentIntent is
 * `requires_payment_method` (a refused card, `refused`); a copy of its fixtures answers
 * `succeeded` (and SetupIntents hold a card, `succeed`). Both run, and `payments()` picks the one
 * the relay sends to. `refunds: 'pending'` leaves refunds pending in both.
 */
export async function startStripeMock(
  options: {
    payments?: PaymentsAnswer;
    refunds?: 'pending' | 'succeeded';
    /**
     * Answer a request whose Idempotency-Key was answered before with that same answer, as Stripe
     * does (stripe-mock itself makes a new object each time); one that reuses a key with other
     * parameters, or on another endpoint, gets Stripe's 400 `idempotency_error`. On unless
     * turned off: every test talks to a Stripe that keeps its keys.
     */
    replayKeys?: boolean;
  } = {},
  attempt = 1,
): Promise<StripeMock> {
  const { stdout } = await run('bash', [join(root, 'test', 'stripe', 'install.sh')], { timeout: 600_000 });
  const dir = stdout.trim();
  const work = mkdtempSync(join(tmpdir(), 'stripe-mock-'));
  const shipped = readFileSync(join(dir, 'fixtures3.json'), 'utf8');
  const variant = (answer: PaymentsAnswer) => {
    const fixtures = JSON.parse(shipped) as Fixtures;
    if (answer === 'succeed') {
      Object.assign(fixtures.resources.payment_intent ?? {}, {
        status: 'succeeded',
        last_payment_error: null,
      });
      // A Checkout Session in setup mode completes with a SetupIntent holding the card it saved.
      Object.assign(fixtures.resources.setup_intent ?? {}, {
        status: 'succeeded',
        payment_method: 'pm_card_visa',
      });
    }
    if (options.refunds === 'pending') Object.assign(fixtures.resources.refund ?? {}, { status: 'pending' });
    const file = join(work, `fixtures-${answer}.json`);
    writeFileSync(file, JSON.stringify(fixtures));
    return file;
  };

  const children: ChildProcess[] = [];
  const ports = {} as Record<PaymentsAnswer, number>;
  for (const answer of ['succeed', 'refused'] as const) {
    ports[answer] = await freePort();
    // It serves HTTPS too, on a fixed default port unless told: both on free loopback ports.
    children.push(
      spawn(
        join(dir, 'bin', 'stripe-mock'),
        [
          '-http-addr',
          `127.0.0.1:${ports[answer]}`,
          '-https-addr',
          `127.0.0.1:${await freePort()}`,
          '-fixtures',
          variant(answer),
        ],
        { stdio: 'ignore' },
      ),
    );
  }
  const exited = children.map((child) => new Promise<void>((resolve) => child.on('exit', () => resolve())));
  let current: PaymentsAnswer = options.payments ?? 'refused';

  const replayKeys = options.replayKeys ?? true;
  const requests: StripeRequest[] = [];
  const answers = new Map<
    string,
    { status: number; headers: IncomingHttpHeaders; body: Buffer; asked: string }
  >();
  let holding = false;
  let waiting: Array<() => void> = [];
  const refusals = new Map<string, { code: string; message: string }>();
  const relay = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const path = (incoming.url ?? '').split('?')[0] ?? '';
      const refusal = refusals.get(path);
      if (refusal !== undefined) {
        refusals.delete(path);
        const body = Buffer.concat(chunks);
        requests.push({
          method: incoming.method ?? '',
          path,
          idempotencyKey: [incoming.headers['idempotency-key']].flat()[0],
          params: Object.fromEntries(new URLSearchParams(body.toString('utf8'))),
          status: 400,
          answered: undefined,
        });
        outgoing.writeHead(400, { 'content-type': 'application/json' });
        outgoing.end(JSON.stringify({ error: { type: 'invalid_request_error', ...refusal } }));
        return;
      }
      if (holding) waiting.push(send);
      else send();
    });
    const send = () => {
      const body = Buffer.concat(chunks);
      const port = ports[current];
      const forward = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: incoming.method,
          path: incoming.url,
          headers: { ...incoming.headers, host: `127.0.0.1:${port}` },
        },
        (answer) => {
          const parts: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => parts.push(chunk));
          answer.on('end', () => {
            const header = incoming.headers['idempotency-key'];
            const key = Array.isArray(header) ? header[0] : header;
            const asked = askedOf(incoming.method, incoming.url, body);
            const first = key === undefined || !replayKeys ? undefined : answers.get(key);
            // Stripe answers a key reused with other parameters (or on another endpoint) with an
            // idempotency_error, never with the first answer.
            const replayed = first === undefined || first.asked === asked ? first : idempotencyError(key);
            const sent = replayed ?? {
              status: answer.statusCode ?? 502,
              headers: answer.headers,
              body: Buffer.concat(parts),
              asked,
            };
            if (key !== undefined && replayKeys && first === undefined) answers.set(key, sent);
            requests.push({
              method: incoming.method ?? '',
              path: (incoming.url ?? '').split('?')[0] ?? '',
              idempotencyKey: key,
              params: Object.fromEntries(new URLSearchParams(body.toString('utf8'))),
              status: sent.status,
              answered: answeredId(sent.body),
            });
            outgoing.writeHead(sent.status, sent.headers);
            outgoing.end(sent.body);
          });
        },
      );
      forward.on('error', () => outgoing.writeHead(502).end());
      forward.end(body);
    };
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
  // Either mock may lose a race for a port chosen free a moment before (it then exits at once):
  // a start that does not answer is stopped whole, never left running, and tried again.
  let gone = false;
  void Promise.race(exited).then(() => {
    gone = true;
  });
  try {
    for (const port of Object.values(ports)) {
      await pollUntil(
        async () => {
          if (gone) throw new Error('stripe-mock exited while starting');
          const answer = await fetch(`http://127.0.0.1:${port}/v1/account`, {
            headers: { authorization: 'Bearer sk_test_ready' },
          }).catch(() => undefined);
          return answer?.ok === true;
        },
        (ready) => ready,
        {
          timeoutMs: 20_000,
          what: 'stripe-mock to answer',
          rethrow: (e) => e instanceof Error && e.message.includes('exited while starting'),
        },
      );
    }
  } catch (error) {
    await new Promise<void>((resolve) => relay.close(() => resolve()));
    for (const child of children) child.kill('SIGKILL');
    await Promise.all(exited);
    rmSync(work, { recursive: true, force: true });
    if (attempt >= 3) throw error;
    return startStripeMock(options, attempt + 1);
  }
  return {
    url,
    requests,
    fixtures: (JSON.parse(shipped) as Fixtures).resources,
    payments(answer) {
      current = answer;
    },
    hold(on) {
      holding = on;
      if (on) return;
      const release = waiting;
      waiting = [];
      for (const send of release) send();
    },
    get held() {
      return waiting.length;
    },
    refuseNext(path, code, message) {
      refusals.set(path, { code, message });
    },
    async close() {
      await new Promise<void>((resolve) => relay.close(() => resolve()));
      for (const child of children) child.kill('SIGTERM');
      await Promise.all(exited);
      rmSync(work, { recursive: true, force: true });
    },
  };
}

/** The `id` of a JSON object answered, if any. */
function answeredId(body: Buffer): string | undefined {
  try {
    const id = (JSON.parse(body.toString('utf8')) as { id?: unknown }).id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The metadata a request carried to Stripe, from its form fields (`metadata[key]`). */
export function metadataOf(params: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(params)
      .filter(([name]) => name.startsWith('metadata['))
      .map(([name, value]) => [name.slice('metadata['.length, -1), value]),
  );
}

/** A request as Stripe's idempotency layer compares it: its endpoint and its parameters, in any order. */
function askedOf(method: string | undefined, url: string | undefined, body: Buffer): string {
  const params = [...new URLSearchParams(body.toString('utf8'))].sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  );
  return JSON.stringify([method, (url ?? '').split('?')[0], params]);
}

/** Stripe's answer to a key reused with other parameters (its wording). */
function idempotencyError(key: string | undefined) {
  const body = Buffer.from(
    JSON.stringify({
      error: {
        type: 'idempotency_error',
        message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
      },
    }),
  );
  return {
    status: 400,
    headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
    body,
    asked: '',
  };
}
