import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Debian's chromium, which .ci/run installs; playwright-core drives it (it downloads no browser). */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Headless Chromium as root on a machine without internet: no sandbox, and none of the
 * background connections that this network would refuse many at a time.
 */
export function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error('Debian chromium must be installed (.ci/run installs it)');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
}
