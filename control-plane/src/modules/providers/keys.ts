import { createHash, randomBytes } from 'node:crypto';
import type { Environment } from '@mcp-meter/contracts/usage-record';

const PREFIXES: ReadonlyArray<readonly [string, Environment]> = [
  ['sk_test_', 'sandbox'],
  ['sk_sandbox_', 'sandbox'],
  ['sk_live_', 'live'],
];

/** 32 random bytes: unguessable, and only its hash is stored. */
export function generateKey(environment: Environment): string {
  return `${environment === 'live' ? 'sk_live_' : 'sk_test_'}${randomBytes(32).toString('base64url')}`;
}

export function hashKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/** The environment a key claims by its prefix, or undefined when it is not a secret key. */
export function environmentOfKey(key: string): Environment | undefined {
  return PREFIXES.find(([prefix]) => key.startsWith(prefix))?.[1];
}

export const keyHint = (key: string): string => `${key.slice(0, key.indexOf('_', 3) + 1)}…${key.slice(-4)}`;
