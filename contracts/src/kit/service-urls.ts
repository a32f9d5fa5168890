import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Where a running service answers, written to its data directory when it starts, so that the
 * admin CLI run beside it (`npm run admin`) mints tokens for the issuer that service checks,
 * without being told the port again (issue 60: a token minted for the default port was refused
 * as "wrong issuer" by a service on another one).
 */
export interface ServiceUrls {
  /** The control plane's public URL: the issuer of the access tokens it mints. */
  publicUrl: string;
  controlPlaneUrl: string;
  proxyUrl?: string | undefined;
}

const FILE = 'service.json';

/** Records `urls` in `dataDir` (replacing what an earlier start wrote, in one rename). */
export function writeServiceUrls(dataDir: string, urls: ServiceUrls): void {
  const path = join(dataDir, FILE);
  writeFileSync(`${path}.tmp`, `${JSON.stringify(urls, null, 2)}\n`);
  renameSync(`${path}.tmp`, path);
}

/** What the service last started on `dataDir` recorded, or undefined (none, or unreadable). */
export function readServiceUrls(dataDir: string): ServiceUrls | undefined {
  try {
    const urls = JSON.parse(readFileSync(join(dataDir, FILE), 'utf8')) as Partial<ServiceUrls>;
    if (typeof urls.publicUrl !== 'string' || typeof urls.controlPlaneUrl !== 'string') return undefined;
    return {
      publicUrl: urls.publicUrl,
      controlPlaneUrl: urls.controlPlaneUrl,
      proxyUrl: typeof urls.proxyUrl === 'string' ? urls.proxyUrl : undefined,
    };
  } catch {
    return undefined;
  }
}
