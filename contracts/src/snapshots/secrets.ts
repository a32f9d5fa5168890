import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { EnvReader } from '../kit/env';

/**
 * The deployment's 32-byte secret: it seals origin API keys (AES-256-GCM) in PostgreSQL and in
 * the snapshots the proxy reads, and derives the token the proxy presents to the control
 * plane's internal API. `SECRET_KEY` (64 hex characters) sets it; otherwise it is created once
 * in DATA_DIR/secret.key and shared by every service that uses the same DATA_DIR.
 */
export function loadSecretKey(configured: string | undefined, dataDir: string): Buffer {
  if (configured !== undefined) {
    if (!/^[0-9a-fA-F]{64}$/.test(configured))
      throw new Error('SECRET_KEY: expected 64 hexadecimal characters (32 bytes)');
    return Buffer.from(configured, 'hex');
  }
  const file = join(dataDir, 'secret.key');
  if (!existsSync(file)) {
    // Services sharing a DATA_DIR may start together: the secret is written whole under a
    // private name and then linked into place, which fails if another process got there first.
    // A reader therefore never sees an empty or partly written file, and everyone ends up
    // with the first secret linked.
    mkdirSync(dirname(file), { recursive: true });
    const draft = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    writeFileSync(draft, randomBytes(32).toString('hex'), { flag: 'wx', mode: 0o600 });
    try {
      linkSync(draft, file);
    } catch (error) {
      if ((error as { code?: string }).code !== 'EEXIST') throw error;
    } finally {
      unlinkSync(draft);
    }
  }
  chmodSync(file, 0o600);
  const text = readFileSync(file, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(text)) throw new Error(`${file}: not a 32-byte hex secret`);
  return Buffer.from(text, 'hex');
}

/** `v1.<iv>.<tag>.<ciphertext>`, base64url parts. */
export function seal(key: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv, cipher.getAuthTag(), body]
    .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
    .join('.');
}

export function unseal(key: Buffer, sealed: string): string {
  const [version, iv, tag, body] = sealed.split('.');
  if (version !== 'v1' || iv === undefined || tag === undefined || body === undefined)
    throw new Error('not a sealed secret');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
}

/** Bearer token of the control plane's internal API (paywall sessions, limit seeds), derived from the secret. */
export function internalToken(key: Buffer): string {
  return createHmac('sha256', key).update('mcp-meter internal api v1').digest('base64url');
}

/** SECRET_KEY, or the key file under DATA_DIR; a bad value is reported like any other setting. */
export function readSecretKey(env: EnvReader, dataDir: string): Buffer {
  try {
    return loadSecretKey(env.optionalString('SECRET_KEY'), dataDir);
  } catch (error) {
    env.problem(error instanceof Error ? error.message : String(error));
    return Buffer.alloc(32);
  }
}
