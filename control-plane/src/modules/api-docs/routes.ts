import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { App } from '../../http/app';

/**
 * The API reference at `/docs`: the service's own OpenAPI document (`/openapi.json`) rendered by
 * Redoc, whose standalone bundle is served from this service's own files (no CDN: the page works
 * offline and behind a firewall, and loads nothing from elsewhere, as its CSP says).
 */

const require = createRequire(import.meta.url);

/** Redoc's standalone bundle (about 1.1 MB; it finds the `<redoc>` element itself), read once when first asked for. */
let bundle: Buffer | undefined;
const redocBundle = (): Buffer => {
  bundle ??= readFileSync(require.resolve('redoc/bundles/redoc.standalone.js'));
  return bundle;
};

/**
 * Scripts and everything they fetch from this origin only; Redoc styles its page with inline
 * style elements (styled-components), and draws its icons as data: URLs.
 */
const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>MCP Meter API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<redoc spec-url="/openapi.json"></redoc>
<script src="/docs/redoc.standalone.js"></script>
</body>
</html>
`;

export function apiDocsRoutes() {
  return async (app: App) => {
    app.get('/docs', { schema: { hide: true } }, async (_request, reply) =>
      reply
        .header('content-type', 'text/html; charset=utf-8')
        .header('content-security-policy', DOCS_CSP)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .send(PAGE),
    );
    app.get('/docs/redoc.standalone.js', { schema: { hide: true } }, async (_request, reply) =>
      reply
        .header('content-type', 'text/javascript; charset=utf-8')
        .header('cache-control', 'public, max-age=86400')
        .header('x-content-type-options', 'nosniff')
        .send(redocBundle()),
    );
  };
}
