import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { RequestLogger } from '../src/http/request-logger';

function capture(level: string) {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { logger: pino({ level }, stream), lines };
}

describe('a request logger made on demand', () => {
  it('makes no child for lines below the level, and writes the others with every binding', () => {
    const { logger, lines } = capture('warn');
    const request = RequestLogger.factory(logger, { reqId: 'req-1' }, {});
    const provider = request.child({ providerId: 'prv_1', environment: 'sandbox' });
    provider.info({ code: 'x' }, 'not written');
    request.debug('not written');
    // No pino child was made for them.
    expect([request, provider].map((l) => (l as unknown as { made: unknown }).made)).toEqual([
      undefined,
      undefined,
    ]);
    expect(lines).toEqual([]);
    provider.error({ err: new Error('boom') }, 'written');
    request.warn('also written');
    expect(lines.map((l) => [l.msg, l.reqId, l.providerId, l.environment])).toEqual([
      ['written', 'req-1', 'prv_1', 'sandbox'],
      ['also written', 'req-1', undefined, undefined],
    ]);
    expect(lines[0]?.err).toMatchObject({ message: 'boom' });
    expect(provider.level).toBe('warn');
  });

  it('keeps a level a route or child asks for', () => {
    const { logger, lines } = capture('warn');
    const request = RequestLogger.factory(logger, { reqId: 'req-2' }, { level: 'info' });
    request.info('route level');
    const quiet = RequestLogger.factory(logger, { reqId: 'req-3' }, {}).child({ a: 1 }, { level: 'error' });
    quiet.warn('below the child level');
    quiet.error('at it');
    expect(lines.map((l) => [l.msg, l.reqId])).toEqual([
      ['route level', 'req-2'],
      ['at it', 'req-3'],
    ]);
  });
});
