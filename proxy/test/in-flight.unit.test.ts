import { describe, expect, it } from 'vitest';
import { InFlight, type Listed } from '../src/in-flight';

const item = (name: string): Listed & { name: string } => ({ name, slot: -1 });
const names = (list: InFlight<Listed & { name: string }>) =>
  list
    .list()
    .map((i) => i.name)
    .sort();

describe('InFlight', () => {
  it('keeps each member once, whichever order they leave in', () => {
    const list = new InFlight<Listed & { name: string }>();
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(item) as [
      ReturnType<typeof item>,
      ReturnType<typeof item>,
      ReturnType<typeof item>,
      ReturnType<typeof item>,
    ];
    for (const i of [a, b, c, d]) list.add(i);
    list.add(b); // already in: not twice
    expect(list.size).toBe(4);
    list.delete(b); // from the middle: the last one takes its place
    expect(names(list)).toEqual(['a', 'c', 'd']);
    list.delete(d); // the last one
    list.delete(d); // gone already: nothing happens
    expect(names(list)).toEqual(['a', 'c']);
    list.delete(a); // the first
    expect(names(list)).toEqual(['c']);
    expect([a.slot, b.slot, d.slot]).toEqual([-1, -1, -1]);
    list.add(b);
    list.delete(c);
    list.delete(b);
    expect(list.size).toBe(0);
    expect(list.list()).toEqual([]);
  });

  it('never removes a member in the name of one that is not in the list', () => {
    const list = new InFlight<Listed & { name: string }>();
    const a = item('a');
    const b = item('b');
    list.add(a);
    list.add(b);
    // Another list's member with a slot that is taken here.
    const stranger = { name: 'x', slot: 0 };
    list.delete(stranger);
    expect(names(list)).toEqual(['a', 'b']);
  });

  it('lets members leave while the caller goes through a listing', () => {
    const list = new InFlight<Listed & { name: string }>();
    const members = Array.from({ length: 50 }, (_, i) => item(`m${i}`));
    for (const m of members) list.add(m);
    const seen: string[] = [];
    for (const m of list.list()) {
      seen.push(m.name);
      list.delete(m);
    }
    expect(seen.sort()).toEqual(members.map((m) => m.name).sort());
    expect(list.size).toBe(0);
  });

  it('stays exact through many arrivals and departures', () => {
    const list = new InFlight<Listed & { name: string }>();
    const present = new Set<ReturnType<typeof item>>();
    let seed = 7;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pool = Array.from({ length: 40 }, (_, i) => item(`p${i}`));
    for (let step = 0; step < 5_000; step++) {
      const m = pool[Math.floor(random() * pool.length)] as ReturnType<typeof item>;
      if (random() < 0.5) {
        list.add(m);
        present.add(m);
      } else {
        list.delete(m);
        present.delete(m);
      }
      expect(list.size).toBe(present.size);
    }
    expect(names(list)).toEqual([...present].map((m) => m.name).sort());
    for (const m of pool) expect(m.slot >= 0).toBe(present.has(m));
  });
});
