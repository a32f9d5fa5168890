import { describe, expect, it } from 'vitest';
import { freePort } from '../src/kit/net';

describe('freePort', () => {
  it('never hands this process the same port twice, even when the kernel offers it again', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 300; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
  });
});
