/**
 * The benchmark's far ends, in one process: a null responder (B0: fixed bytes, no parsing) and a
 * trivial MCP origin (B1..B3: parses the JSON-RPC call and answers a tool result at once),
 * counting the calls it answers per path. Prints its two ports as JSON on stdout. The origin
 * listens on ORIGIN_PORT when given (started again where the C origin stood), else a free port.
 */
import { createServer } from 'node:http';

const NULL_BODY = Buffer.from('{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3"}]}}');
const counts = new Map<string, number>();

const nullResponder = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': NULL_BODY.length });
    res.end(NULL_BODY);
  });
});

const origin = createServer((req, res) => {
  if (req.method === 'GET' && req.url?.startsWith('/count')) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(Object.fromEntries(counts)));
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let message: { id?: unknown; method?: unknown; params?: { arguments?: { a?: number; b?: number } } };
    try {
      message = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (message.method === 'tools/call') counts.set(req.url ?? '', (counts.get(req.url ?? '') ?? 0) + 1);
    const sum = (message.params?.arguments?.a ?? 0) + (message.params?.arguments?.b ?? 0);
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: message.id ?? null,
      result: { content: [{ type: 'text', text: String(sum) }] },
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
for (const server of [nullResponder, origin]) server.keepAliveTimeout = 60_000;

await new Promise<void>((resolve) => nullResponder.listen(0, '127.0.0.1', resolve));
await new Promise<void>((resolve) =>
  origin.listen(Number(process.env.ORIGIN_PORT ?? 0), '127.0.0.1', resolve),
);
const portOf = (s: typeof origin) => {
  const a = s.address();
  return a !== null && typeof a === 'object' ? a.port : 0;
};
process.stdout.write(`${JSON.stringify({ nullPort: portOf(nullResponder), originPort: portOf(origin) })}\n`);
process.on('SIGTERM', () => process.exit(0));
