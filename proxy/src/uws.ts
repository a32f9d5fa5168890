/**
 * uWebSockets.js for the Node this process runs on. No one build ships binaries for Node 20, 22
 * and 24 that load on every glibc the product runs on, so two pinned repacks of upstream's
 * binaries are used, chosen by Node's ABI (`process.versions.modules`), never by trying one and
 * falling back (two hosts on one Node always run the same uWS):
 *
 * - Node 20 and 22 (ABI 115, 127): `uws-pack` 20.0.8, upstream's binaries built against glibc
 *   2.27, so they load on Debian 11+, Ubuntu 20.04+ and RHEL 8+.
 * - Node 24 and 25 (ABI 137, 141): `@btc-vision/uwebsockets.js` 20.57.0 (installed under the
 *   name `uWebSockets.js`), upstream's v20.57.0 built against glibc 2.38: Debian 13, Ubuntu
 *   24.04 and the container images (docs/self-hosting.md).
 *
 * The types are upstream's (`uWebSockets.js`), the same API in both.
 */
import type * as UWS from 'uWebSockets.js';

/** The ABIs `uws-pack` has binaries for (Node 18, 20, 21, 22). */
const UWS_PACK_ABIS = new Set(['108', '115', '120', '127']);

const uws: typeof UWS = UWS_PACK_ABIS.has(process.versions.modules)
  ? ((await import('uws-pack')) as unknown as typeof UWS)
  : ((await import('uWebSockets.js')) as unknown as { default: typeof UWS }).default;

export default uws;
