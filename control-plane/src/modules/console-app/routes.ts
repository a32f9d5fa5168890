import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { FastifyReply } from 'fastify';
import type { App } from '../../http/app';

/**
 * The provider console at `/console`: the static files of console/ (React, built by Vite into
 * console/dist, see deploy/console-build.mjs), served in every mode. The app is a client of the
 * public API on this same origin, with the member's session cookie; it loads nothing from
 * elsewhere, as its CSP says. Hashed assets are cached for a year; every other path under
 * /console is the app's page (its router reads the path), never cached.
 */

/** console/dist beside the repository's source (the services' build keeps this file's location). */
export const DEFAULT_CONSOLE_DIR = resolve(import.meta.dirname, '..', '..', '..', '..', 'console', 'dist');

const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
  png: 'image/png',
  woff2: 'font/woff2',
  json: 'application/json',
};

/** An asset's name as Vite writes them (`index-CetHMSAk.js`): nothing else is read from disk. */
const ASSET = /^assets\/[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.(js|css|svg|png|woff2|json)$/;

const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Console not built</title></head>
<body><main><h1>The console is not built</h1>
<p>Run <code>npm run build</code> (or <code>npm start</code>, which builds it when missing), then reload.</p>
</main></body></html>
`;

export function consoleRoutes(directory = DEFAULT_CONSOLE_DIR) {
  let page: Promise<Buffer> | undefined;
  const secure = (reply: FastifyReply) =>
    reply
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY');

  const sendPage = async (reply: FastifyReply) => {
    page ??= readFile(join(directory, 'index.html'));
    let html: Buffer;
    try {
      html = await page;
    } catch {
      page = undefined;
      return secure(reply)
        .status(503)
        .header('content-type', 'text/html; charset=utf-8')
        .header('cache-control', 'no-store')
        .send(NOT_BUILT);
    }
    return secure(reply)
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', CONSOLE_CSP)
      .header('cache-control', 'no-cache')
      .send(html);
  };

  return async (app: App) => {
    app.get('/console', { schema: { hide: true } }, (_request, reply) => sendPage(reply));
    app.get<{ Params: { '*': string } }>('/console/*', { schema: { hide: true } }, async (request, reply) => {
      const path = request.params['*'];
      if (!path.startsWith('assets/')) return sendPage(reply);
      const match = ASSET.exec(path);
      let body: Buffer | undefined;
      if (match !== null) body = await readFile(join(directory, path)).catch(() => undefined);
      if (match === null || body === undefined)
        return secure(reply)
          .status(404)
          .header('content-type', 'text/plain; charset=utf-8')
          .send('Not found');
      return secure(reply)
        .header('content-type', TYPES[match[1] as string] ?? 'application/octet-stream')
        .header('cache-control', 'public, max-age=31536000, immutable')
        .send(body);
    });
  };
}
