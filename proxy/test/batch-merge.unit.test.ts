import { describe, expect, it } from 'vitest';
import { BatchMerger } from '../src/batch-merge';

/** Feeds `text` to a merger in pieces cut at `cuts`, and returns everything it sent. */
function merge(text: string, extra: unknown[], cuts: number[]): string {
  const merger = new BatchMerger(extra);
  const out: Buffer[] = [];
  const bytes = Buffer.from(text);
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(merger.write(bytes.subarray(from, cut)));
    from = cut;
  }
  out.push(merger.end());
  return Buffer.concat(out).toString('utf8');
}

/** A small deterministic generator, so a failure names the seed that made it. */
function generator(seed: number) {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
}

describe('splicing refused calls into a streamed JSON batch answer', () => {
  const ours = [{ jsonrpc: '2.0', id: 'r', result: { isError: true } }];

  it('appends to an array, wraps a lone object, and answers alone for an empty or unreadable answer', () => {
    expect(JSON.parse(merge('[{"id":1}]', ours, []))).toEqual([{ id: 1 }, ...ours]);
    expect(JSON.parse(merge(' \n[ ] \n', ours, [3]))).toEqual(ours);
    expect(JSON.parse(merge('{"id":1}\n', ours, [4]))).toEqual([{ id: 1 }, ...ours]);
    expect(JSON.parse(merge('', ours, []))).toEqual(ours);
    expect(JSON.parse(merge('   ', ours, [1]))).toEqual(ours);
    expect(JSON.parse(merge('<html>oops</html>', ours, [2]))).toEqual(ours);
  });

  it('agrees with JSON.parse over random answers cut into random pieces', () => {
    for (let seed = 1; seed <= 2_000; seed++) {
      const random = generator(seed);
      const space = () => [' ', '\n', '\r\n', '\t', ''][Math.floor(random() * 5)] ?? '';
      const answers = Array.from({ length: Math.floor(random() * 4) }, (_, i) => ({
        jsonrpc: '2.0',
        id: i,
        result: { text: ']'.repeat(Math.floor(random() * 3)), n: [1, [2]] },
      }));
      const lone = answers.length === 1 && random() < 0.5;
      const body = lone
        ? `${space()}${JSON.stringify(answers[0])}${space()}`
        : `${space()}[${space()}${answers.map((a) => JSON.stringify(a)).join(`,${space()}`)}${space()}]${space()}`;
      const extra = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => ({ id: `x${i}` }));
      const cuts = Array.from({ length: Math.floor(random() * 5) }, () =>
        Math.floor(random() * body.length),
      ).sort((a, b) => a - b);
      const merged = merge(body, extra, cuts);
      expect(JSON.parse(merged), `seed ${seed}: ${body} | ${cuts}`).toEqual([...answers, ...extra]);
    }
  });
});
