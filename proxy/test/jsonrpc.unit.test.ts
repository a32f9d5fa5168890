import { describe, expect, it } from 'vitest';
import { outcomeOf, toolCallsIn } from '../src/jsonrpc';
import { routeOf } from '../src/routing';

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

  it('classifies outcomes', () => {
    const answer = { error: false, toolError: false, inputRequired: false };
    expect(outcomeOf(200, answer)).toBe('success');
    expect(outcomeOf(200, { ...answer, toolError: true })).toBe('error');
    expect(outcomeOf(200, { ...answer, error: true })).toBe('error');
    expect(outcomeOf(200, { ...answer, inputRequired: true, requestState: 's' })).toBe('input_required');
    expect(outcomeOf(200, { ...answer, task: true })).toBe('task');
    expect(outcomeOf(404, undefined)).toBe('error');
    expect(outcomeOf(502, undefined)).toBe('upstream_error');
    expect(outcomeOf(200, undefined)).toBe('success');
    expect(outcomeOf(302, undefined)).toBe('upstream_error');
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
    for (const rest of ['/..', '/../x', '/%2e%2E/x', '/./x', '/a%2Fb', '/a%5Cb', '/a\\b', '/%e0'])
      expect(routeOf(`/mcp/weather${rest}`, 'x', undefined)).toBe('unsafe_path');
    expect(routeOf('/mcp/weather/a..b/.well-known', 'x', undefined)).toEqual({
      subdomain: 'weather',
      rest: '/a..b/.well-known',
    });
  });
});
