import { createServer, request as httpRequest, type Server } from 'node:http';
import { freePort } from '@mcp-meter/contracts/kit';
import { customerWithToken, suffix } from './flows';
import type { StackName, sharedStackEnv } from './processes';
import { startSeller, startSplitStack } from './seller';

/** What a conformance run through the proxy talks to, and what it was metered as. */
export interface ProxiedOrigin {
  /** The loopback relay in front of the proxy that adds the customer's token. */
  relayUrl: string;
  customerRef: string;
}

/**
 * The split stack (control plane with ingest, one proxy) that the conformance suites run
 * through, with a provider whose default plan leaves plenty of calls. The suite cannot send an
 * access token, so each registered origin gets a loopback relay that adds the customer's
 * `Authorization` header (what any configured client does) and passes everything else, `Host`
 * and `Origin` included, as it came.
 */
export async function conformanceStack(
  name: StackName,
  infra: Parameters<typeof sharedStackEnv>[0]['infra'],
) {
  const stack = await startSplitStack({ name, infra, secretKey: 'ce'.repeat(32), publicUrl: true });
  const relays: Server[] = [];
  await stack.ready;
  const seller = await startSeller(stack, {
    provider: 'Conformance Co',
    product: 'Everything',
    plans: [{ name: 'Plenty', price: 0, limit: 1_000_000, default: true }],
  });
  const { api } = seller;

  /** Registers `originUrl` as an MCP server and puts a relay with a new customer's token before it. */
  const proxied = async (originUrl: string): Promise<ProxiedOrigin> => {
    const relayPort = await freePort();
    const relayUrl = `http://127.0.0.1:${relayPort}/mcp`;
    const registered = await seller.register(originUrl, {
      name: `everything-${suffix()}`,
      defaultPlan: 'Plenty',
      // The suite's "valid localhost" request carries the Origin of the URL it was given.
      extra: { allowedOrigins: [new URL(relayUrl).origin] },
    });
    const customer = await customerWithToken(api);
    const target = new URL(`${stack.proxyUrl}/mcp/${registered.subdomain}`);
    const relay = createServer((req, res) => {
      const rest = (req.url ?? '/mcp').replace(/^\/mcp/, '');
      const forwarded = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: `${target.pathname}${rest}`,
          headers: { ...req.headers, authorization: `Bearer ${customer.token}` },
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forwarded.on('error', () => res.destroy());
      req.pipe(forwarded);
      res.on('close', () => forwarded.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(relayPort, '127.0.0.1', resolve));
    relays.push(relay);
    return { relayUrl, customerRef: customer.ref };
  };

  const close = async () => {
    for (const relay of relays) {
      relay.closeAllConnections();
      await new Promise<void>((resolve) => relay.close(() => resolve()));
    }
    await stack.stop();
  };
  return { api, proxied, close };
}
