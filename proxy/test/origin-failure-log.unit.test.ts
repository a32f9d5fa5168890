import type { Logger } from '@mcp-meter/contracts/kit';
import { describe, expect, it } from 'vitest';
import { OriginFailureLog } from '../src/origin/failure-log';

/** The log's warnings, as objects, and a clock the test moves by hand. */
function fixture() {
  const lines: Array<Record<string, unknown>> = [];
  // Only `warn` is used: each call is kept as the line's fields and message.
  const logger = {
    warn: (fields: Record<string, unknown>, msg: string) => void lines.push({ ...fields, msg }),
  } as unknown as Logger;
  let now = 0;
  const log = new OriginFailureLog(logger, () => now);
  const advance = (ms: number) => {
    now += ms;
  };
  return { lines, log, advance };
}

describe('the warnings of failed origin requests', () => {
  it('logs one failure a second for each server and kind, then how many it left out', () => {
    const { lines, log, advance } = fixture();
    for (let i = 0; i < 500; i++) log.failed('mcp_a', 'origin_busy', new Error('busy'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ server: 'mcp_a', code: 'origin_busy', msg: 'origin request failed' });
    expect(lines[0]).not.toHaveProperty('alsoFailed');
    advance(999);
    log.failed('mcp_a', 'origin_busy', new Error('busy'));
    expect(lines).toHaveLength(1);
    advance(1);
    log.failed('mcp_a', 'origin_busy', new Error('busy'));
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ server: 'mcp_a', code: 'origin_busy', alsoFailed: 500 });
  });

  it('keeps each server and each kind of failure apart', () => {
    const { lines, log } = fixture();
    log.failed('mcp_a', 'origin_busy', new Error('busy'));
    log.failed('mcp_a', 'origin_unreachable', new Error('refused'));
    log.failed('mcp_b', 'origin_busy', new Error('busy'));
    log.failed('mcp_b', 'origin_busy', new Error('busy'));
    expect(lines.map((l) => [l.server, l.code])).toEqual([
      ['mcp_a', 'origin_busy'],
      ['mcp_a', 'origin_unreachable'],
      ['mcp_b', 'origin_busy'],
    ]);
  });
});
