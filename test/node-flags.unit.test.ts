import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '../deploy/node-flags';

const root = resolve(import.meta.dirname, '..');

describe('the V8 flags services start with (deploy/node-flags.ts)', () => {
  it('are on every command line that spells out how a service starts', () => {
    const scripts = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts as Record<
      string,
      string
    >;
    const fuzz = readFileSync(join(root, 'bench', 'api-fuzz.sh'), 'utf8');
    const starts = fuzz.split('\n').filter((line) => line.includes('deploy/start.mjs'));
    expect(starts.length).toBeGreaterThan(0);
    for (const line of [scripts.start as string, ...starts])
      expect(line).toContain(`node ${NODE_FLAGS.join(' ')} deploy/start.mjs`);
  });
});
