import { describe, expect, it } from 'vitest';
import { eraOf, headerMismatch, LEGACY } from '../src/era';
import { PaywallStates, STATE_PREFIX } from '../src/paywall/state';

const MODERN = '2026-07-28';
const call = (name: string, meta: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name, arguments: { a: 1 }, _meta: meta },
});
const modernMeta = (capabilities: Record<string, unknown> = {}) => ({
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': capabilities,
});

describe('the era of a request', () => {
  it('is modern by its _meta version or its header, and reads URL elicitation per request', () => {
    expect(eraOf({}, call('add', modernMeta({ elicitation: { url: {} } })))).toEqual({
      modern: true,
      urlElicitation: true,
    });
    expect(eraOf({ 'mcp-protocol-version': MODERN }, call('add'))).toEqual({
      modern: true,
      urlElicitation: false,
    });
    expect(eraOf({ 'mcp-protocol-version': '2025-11-25' }, call('add'))).toEqual(LEGACY);
    expect(eraOf({ 'mcp-protocol-version': 'next' }, call('add'))).toEqual(LEGACY);
    expect(eraOf({ 'mcp-protocol-version': MODERN }, [call('add')])).toEqual(LEGACY);
  });
});

describe('mirrored headers', () => {
  const modern = { modern: true, urlElicitation: false };
  const headers = { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'add' };

  it('agree with the body, Base64-sentinel names decoded', () => {
    expect(headerMismatch(headers, call('add', modernMeta()), modern)).toBeUndefined();
    const name = 'héllo wörld';
    const encoded = `=?base64?${Buffer.from(name).toString('base64')}?=`;
    expect(
      headerMismatch({ ...headers, 'mcp-name': encoded }, call(name, modernMeta()), modern),
    ).toBeUndefined();
  });

  it('are refused when they contradict the body, are missing on a modern request, or are not header-safe', () => {
    const body = call('add', modernMeta());
    expect(headerMismatch({ ...headers, 'mcp-method': 'tools/list' }, body, modern)).toContain('Mcp-Method');
    expect(headerMismatch({ ...headers, 'mcp-name': 'sub' }, body, modern)).toContain('Mcp-Name');
    expect(headerMismatch({ ...headers, 'mcp-name': '=?base64?%%%?=' }, body, modern)).toBeDefined();
    expect(headerMismatch({ ...headers, 'mcp-protocol-version': '2027-01-01' }, body, modern)).toContain(
      'MCP-Protocol-Version',
    );
    const { 'mcp-method': _m, ...noMethod } = headers;
    expect(headerMismatch(noMethod, body, modern)).toContain('missing');
    const { 'mcp-name': _n, ...noName } = headers;
    expect(headerMismatch(noName, body, modern)).toContain('missing');
    expect(headerMismatch({ ...headers, 'mcp-name': 'a\u0000b' }, body, modern)).toContain('characters');
  });

  it('are optional for 2025 clients, but never trusted when present and wrong', () => {
    expect(headerMismatch({}, call('add'), LEGACY)).toBeUndefined();
    expect(headerMismatch({ 'mcp-method': 'tools/list' }, call('add'), LEGACY)).toContain('Mcp-Method');
    expect(headerMismatch({ 'mcp-method': 'tools/call' }, call('add'), LEGACY)).toBeUndefined();
  });
});

describe('paywall request states', () => {
  const binding = { customer: 'cus_1', server: 'srv_1', tool: 'add', arguments: { b: 2, a: 1 } };

  it('verify for the same customer, server, tool and arguments (in any key order), and nothing else', async () => {
    const states = new PaywallStates(Buffer.alloc(32, 1));
    const state = await states.mint(binding);
    expect(PaywallStates.isOurs(state)).toBe(true);
    expect(await states.check(state, { ...binding, arguments: { a: 1, b: 2 } })).toBe('ok');
    expect(await states.check(state, { ...binding, customer: 'cus_2' })).toBe('mismatch');
    expect(await states.check(state, { ...binding, tool: 'sub' })).toBe('mismatch');
    expect(await states.check(state, { ...binding, arguments: { a: 1, b: 3 } })).toBe('mismatch');
    // Change the signature's first character: it carries six whole bits, where the last one
    // carries padding a lenient decoder ignores, so tampering there could decode to the same bytes.
    const dot = state.lastIndexOf('.') + 1;
    const flipped = state[dot] === 'A' ? 'B' : 'A';
    expect(await states.check(`${state.slice(0, dot)}${flipped}${state.slice(dot + 1)}`, binding)).toBe(
      'invalid',
    );
    expect(await states.check(`${STATE_PREFIX}not-a-jwt`, binding)).toBe('invalid');
  });

  it('from a previous key verify while it is listed; from any other key never', async () => {
    const old = new PaywallStates(Buffer.alloc(32, 1));
    const state = await old.mint(binding);
    expect(await new PaywallStates(Buffer.alloc(32, 2), [Buffer.alloc(32, 1)]).check(state, binding)).toBe(
      'ok',
    );
    expect(await new PaywallStates(Buffer.alloc(32, 2)).check(state, binding)).toBe('invalid');
  });
});
