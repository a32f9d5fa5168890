import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestControlPlane } from '../../test/helpers/control-plane';
import { createMeter, orThrow } from '../src/index';
import { type Listening, listen, startService } from './service';

/**
 * The Python package (sdk/python, standard library only) with the machine's python3 against the
 * running service: a webhook the service delivered verified (and refused tampered, stale, with
 * another secret, without or with a malformed header), limits checked and usage recorded.
 */
describe('the Python package', () => {
  let harness: TestControlPlane;
  let url: string;
  let receiver: Listening;
  const received: Array<{ body: Buffer; signature: string }> = [];
  let dir: string;

  beforeAll(async () => {
    ({ harness, url } = await startService());
    receiver = await listen((request, body, response) => {
      received.push({ body, signature: String(request.headers['sv-signature']) });
      response.writeHead(200).end();
    });
    dir = mkdtempSync(join(tmpdir(), 'sdk-python-'));
  });
  afterAll(async () => {
    await receiver?.close();
    await harness?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('verifies deliveries and meters calls as the TypeScript SDK does', async () => {
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Python Co' });
    const meter = createMeter({ apiKey: sandboxKey, baseUrl: url });
    const product = await orThrow(meter.POST('/v1/ui/products', { body: { name: 'Py' } }));
    await orThrow(
      meter.POST('/v1/ui/products/{id}/plans', {
        params: { path: { id: product.id } },
        body: {
          name: 'Free',
          type: 'recurring',
          billingCycle: 'monthly',
          currency: 'usd',
          price: 0,
          limit: 2,
          default: true,
        },
      }),
    );
    await orThrow(meter.POST('/v1/sdk/customers', { body: { externalRef: 'py-user' } }));
    const endpoint = await orThrow(
      meter.POST('/v1/webhook_endpoints', { body: { url: `${receiver.url}/hooks` } }),
    );
    await orThrow(
      meter.POST('/v1/ui/webhooks/{endpointId}/test', { params: { path: { endpointId: endpoint.id } } }),
    );
    const delivery = received.at(-1);
    if (delivery === undefined) throw new Error('no delivery arrived');
    writeFileSync(join(dir, 'body'), delivery.body);

    const { stdout } = await promisify(execFile)(
      'python3',
      [
        join(import.meta.dirname, 'python_check.py'),
        url,
        sandboxKey,
        product.id,
        join(dir, 'body'),
        delivery.signature,
        endpoint.secret,
      ],
      { env: { ...process.env, PYTHONPATH: join(import.meta.dirname, '..', 'python') }, timeout: 60_000 },
    );
    expect(JSON.parse(stdout)).toEqual({
      event: 'payment.succeeded',
      tampered: 'no_matching_signature',
      other_secret: 'no_matching_signature',
      rotating: 'accepted',
      stale: 'timestamp_out_of_tolerance',
      missing: 'missing_header',
      malformed: 'malformed_header',
      limits: [true, true, false],
      unknown: [404, 'customer_not_found'],
    });
  });
});
