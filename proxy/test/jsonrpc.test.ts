import { describe, expect, it } from 'vitest';
import { outcomeOf, responsesIn, toolCallsIn } from '../src/jsonrpc';
import { routeOf } from '../src/server';

describe('finding tool calls in MCP traffic', () => {
  it('counts only tools/call requests, in single messages and batches, never notifications', () => {
    expect(toolCallsIn({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'add' } })).toEqual([
      { id: 1, tool: 'add' },
    ]);
    expect(
      toolCallsIn([
        { jsonrpc: '2.0', id: 'a', method: 'tools/call', params: { name: 'x' } },
        { jsonrpc: '2.0', id: 'b', method: 'tools/list' },
        { jsonrpc: '2.0', method: 'tools/call', params: { name: 'no-id' } },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
      ]),
    ).toEqual([{ id: 'a', tool: 'x' }]);
    expect(toolCallsIn(undefined)).toEqual([]);
  });

  it('reads JSON-RPC answers from JSON bodies and SSE streams', () => {
    expect(responsesIn('application/json', '{"jsonrpc":"2.0","id":1,"result":{}}')).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
    ]);
    const sse =
      'event: message\nid: 1\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\n\nevent: message\ndata: {"jsonrpc":"2.0","id":7,"result":{"isError":true}}\n\n';
    expect(responsesIn('text/event-stream', sse).map((r) => r.id ?? r.method)).toEqual([
      'notifications/progress',
      7,
    ]);
  });

  it('classifies outcomes', () => {
    const call = { id: 7, tool: 't' };
    expect(outcomeOf(call, 200, [{ id: 7, result: { content: [] } }])).toBe('success');
    expect(outcomeOf(call, 200, [{ id: 7, result: { isError: true } }])).toBe('error');
    expect(outcomeOf(call, 200, [{ id: 7, error: { code: -32602 } }])).toBe('error');
    expect(outcomeOf(call, 404, [])).toBe('error');
    expect(outcomeOf(call, 502, [])).toBe('upstream_error');
    expect(outcomeOf(call, 200, [])).toBe('success');
  });
});

describe('routing', () => {
  it('routes by path on any host, and by subdomain of the base domain', () => {
    expect(routeOf('/mcp/weather', '127.0.0.1:8081', undefined)).toEqual({ subdomain: 'weather', rest: '' });
    expect(routeOf('/mcp/weather/extra', 'x', undefined)).toEqual({ subdomain: 'weather', rest: '/extra' });
    expect(routeOf('/mcp', 'weather.mcp.example.com', 'mcp.example.com')).toEqual({
      subdomain: 'weather',
      rest: '',
    });
    expect(routeOf('/mcp', 'Weather.MCP.example.com:443', 'mcp.example.com')).toEqual({
      subdomain: 'weather',
      rest: '',
    });
    expect(routeOf('/mcp', 'evil.com', 'mcp.example.com')).toBeUndefined();
    expect(routeOf('/other', 'x', undefined)).toBeUndefined();
  });
});
