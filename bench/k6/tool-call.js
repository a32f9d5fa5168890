// One MCP tools/call per iteration, open model (constant arrival rate): k6 starts iterations on
// schedule whatever the server does, so a slow target shows up as latency and dropped iterations.
//   TARGET_URL, RATE (per second), DURATION (e.g. 10s), TOKEN (optional bearer), SUMMARY (output path),
//   MODERN=1 for an MCP 2026-07-28 call (its `_meta` envelope and mirrored headers)
import { check } from 'k6';
import http from 'k6/http';

const rate = Number(__ENV.RATE);
export const options = {
  scenarios: {
    calls: {
      executor: 'constant-arrival-rate',
      rate,
      timeUnit: '1s',
      duration: __ENV.DURATION || '10s',
      preAllocatedVUs: Number(__ENV.VUS || Math.min(600, Math.max(100, Math.ceil(rate / 10)))),
      maxVUs: 1000,
    },
  },
  summaryTrendStats: ['avg', 'p(50)', 'p(90)', 'p(99)', 'max'],
  discardResponseBodies: false,
};

const modern = __ENV.MODERN === '1';
const meta = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'k6', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } },
};
const body = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'add', arguments: { a: 1, b: 2 }, ...(modern ? { _meta: meta } : {}) },
});
const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
if (modern) {
  headers['mcp-protocol-version'] = '2026-07-28';
  headers['mcp-method'] = 'tools/call';
  headers['mcp-name'] = 'add';
}
if (__ENV.TOKEN) headers.authorization = `Bearer ${__ENV.TOKEN}`;
const params = { headers };

export default function () {
  const res = http.post(__ENV.TARGET_URL, body, params);
  check(res, {
    'tool result': (r) =>
      r.status === 200 && r.body.includes('"result"') && !r.body.includes('payment_required'),
  });
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY]: JSON.stringify(data) };
}
