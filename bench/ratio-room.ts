/**
 * What the CPU-ratio goals of issues 28 and 65 leave a metered call, read against the bench's
 * lean hop in Node (BPn: uWebSockets.js in, a keep-alive client over `net` out, nothing read,
 * judged or recorded). The goals divide by nginx (A / N) and by the bare undici hop (B3 / BP);
 * what a Node hop costs before it does any of the proxy's work is taken off each allowance, so a
 * reader sees how many µs a call remain for reading the call, its token, the plan and the limit,
 * the usage record and its spool write (and, for A, storing it in chdb), against what was spent.
 */

/** The hops' own CPU µs a call at saturation (medians over rounds). */
export interface HopCosts {
  A: number;
  N: number;
  B3: number;
  BP: number;
  BPn: number;
}

const f = (v: number) => v.toFixed(1);

/** One goal's allowance beyond the lean hop, for `work`, and what the target spent beyond it. */
function room(target: string, allowed: number, spent: number, lean: number, work: string): string {
  const left = allowed - lean;
  const beyond = left > 0 ? `${f(left)} more than BPn's` : `${f(-left)} less than BPn's`;
  return `puts ${target} at ${f(allowed)} µs a call at most: ${beyond} ${work}, where ${target} spent ${f(spent - lean)} more`;
}

/** The paragraph under the goals table; empty where a figure is missing (older runs had no BPn). */
export function ratioRoomNote(c: HopCosts): string {
  if (![c.A, c.N, c.B3, c.BP, c.BPn].every((v) => Number.isFinite(v) && v > 0)) return '';
  return `
**What the ratio goals leave a metered call.** BPn, a hop in Node that reads, judges and records
nothing (uWebSockets.js in, a lean keep-alive client out), cost ${f(c.BPn)} µs a call, ${(c.BPn / c.N).toFixed(2)}× nginx's.
A / N ≤ 2.0 ${room('A', 2 * c.N, c.A, c.BPn, 'for reading each call, its token, plan and limit, its usage record, the spool write and storing the record in chdb')}.
B3 / BP ≤ 1.15 ${room('B3', 1.15 * c.BP, c.B3, c.BPn, 'for the same but the storing')}.
`;
}
