import { describe, expect, it } from 'vitest';
import { ratioRoomNote } from '../bench/ratio-room';

// The run of 2026-12-07 00:26: A 69.1, nginx 20.5, B3 61.0, BP 39.3, BPn 32.2 µs a call.
const run = { A: 69.1, N: 20.5, B3: 61.0, BP: 39.3, BPn: 32.2 };

describe('the bench report’s room the ratio goals leave a metered call', () => {
  it('takes the lean Node hop’s cost off each goal’s allowance and sets what was spent beside it', () => {
    const note = ratioRoomNote(run);
    expect(note).toContain("cost 32.2 µs a call, 1.57× nginx's");
    expect(note).toContain('puts A at 41.0 µs a call at most: 8.8 more than BPn');
    expect(note).toContain('where A spent 36.9 more');
    expect(note).toContain('puts B3 at 45.2 µs a call at most: 13.0 more than BPn');
    expect(note).toContain('where B3 spent 28.8 more');
  });

  it('says how far short the allowance is when the lean hop alone is over it', () => {
    expect(ratioRoomNote({ ...run, N: 15 })).toContain('puts A at 30.0 µs a call at most: 2.2 less than BPn');
  });

  it('is empty for a run without the lean hop', () => {
    expect(ratioRoomNote({ ...run, BPn: Number.NaN })).toBe('');
  });
});
