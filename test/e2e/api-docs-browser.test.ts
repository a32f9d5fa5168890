import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../helpers/browser';
import { startListeningControlPlane, type TestControlPlane } from '../helpers/control-plane';

interface OpenApi {
  paths: Record<string, Record<string, { summary?: string; operationId?: string }>>;
}

const METHODS = new Set(['get', 'post', 'put', 'patch', 'delete']);
/**
 * The page's JavaScript budget: Redoc's standalone bundle (1,103,471 bytes in 2.5.4) and nothing
 * else; a Redoc upgrade that grows it past this is a decision, not an accident.
 */
const SCRIPT_BUDGET_BYTES = 1_200_000;
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * The API reference at /docs (issue 60), opened in Chromium: Redoc, served from the service's
 * own files, renders the service's /openapi.json with every operation in it, and the page loads
 * nothing from anywhere else (its CSP would refuse it, and the browser would say so).
 */
describe('the API reference at /docs in a browser', () => {
  let harness: TestControlPlane;
  let baseUrl: string;
  let browser: Browser;

  beforeAll(async () => {
    ({ harness, url: baseUrl } = await startListeningControlPlane({ bodyLimitBytes: 1024 * 1024 }));
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await harness?.close();
  });

  it('renders every operation of /openapi.json, loading nothing from elsewhere', async () => {
    const spec = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as OpenApi;
    const operations = Object.entries(spec.paths).flatMap(([path, methods]) =>
      Object.keys(methods)
        .filter((method) => METHODS.has(method))
        .map((method) => ({ path, method })),
    );
    expect(operations.length).toBeGreaterThan(50);

    const page = await browser.newPage();
    // What reached another origin (a request the CSP refuses never leaves: it fails).
    const foreign: string[] = [];
    const problems: string[] = [];
    const refused: string[] = [];
    page.on('requestfinished', (request) => {
      const url = request.url();
      if (!url.startsWith(baseUrl) && !url.startsWith('data:') && !url.startsWith('blob:')) foreign.push(url);
    });
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      // Redoc's sidebar links its maker's logo from their CDN: the page's CSP refuses it.
      if (message.text().includes('Content Security Policy')) refused.push(message.text());
      else problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
    let scriptBytes = 0;
    page.on('response', async (response) => {
      if (response.request().resourceType() === 'script') scriptBytes += (await response.body()).length;
    });
    const answer = await page.goto(`${baseUrl}/docs`);
    expect(answer?.status()).toBe(200);
    expect(answer?.headers()['content-security-policy']).toContain("script-src 'self'");
    // Redoc has rendered the document once the API's title is on the page.
    await page.getByText('MCP Meter API', { exact: false }).first().waitFor({ timeout: 60_000 });
    // Every operation is in the page: Redoc shows each one's method and path.
    const text = await page.locator('body').innerText();
    const missing = operations.filter(({ path }) => !text.includes(path));
    expect(missing).toEqual([]);
    // The recorded examples are shown as request and response samples (createCustomer's here).
    expect(text).toContain('Request samples');
    expect(text).toContain('"Grace Hopper"');
    expect(foreign).toEqual([]);
    expect(problems).toEqual([]);
    for (const message of refused) expect(message).toContain('https://cdn.redoc.ly/redoc/logo-mini.svg');
    expect(scriptBytes).toBeGreaterThan(0);
    expect(scriptBytes).toBeLessThanOrEqual(SCRIPT_BUDGET_BYTES);
    await page.close();
  });

  it('has no serious or critical accessibility violation (axe-core)', async () => {
    // axe is injected past the page's CSP (which allows no inline script) by the test alone.
    const page = await browser.newPage({ bypassCSP: true });
    await page.goto(`${baseUrl}/docs`);
    await page.getByText('MCP Meter API', { exact: false }).first().waitFor({ timeout: 60_000 });
    await page.addScriptTag({ content: AXE });
    const violations = await page.evaluate(async () => {
      const axe = (
        globalThis as unknown as {
          axe: { run(): Promise<{ violations: Array<{ id: string; impact: string }> }> };
        }
      ).axe;
      return (await axe.run()).violations.map((v) => `${v.impact} ${v.id}`);
    });
    // Redoc's own page structure draws moderate findings (heading order, no main landmark,
    // content outside landmarks); nothing that keeps a reader from the reference.
    expect(violations.filter((v) => v.startsWith('serious') || v.startsWith('critical'))).toEqual([]);
    await page.close();
  });
});
