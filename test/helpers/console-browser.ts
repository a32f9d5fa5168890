import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';

/**
 * What the console's browser tests share: a person (a browser context of their own, cookies
 * apart, errors collected), axe, the API calls a page makes to render, and screenshots for
 * docs/console.md (MCPMETER_WRITE_SCREENSHOTS=1).
 */

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
/** API calls a page may make to render (the session, read once per visit, is not the page's). */
export const MAX_CALLS_PER_PAGE = 3;
/** The overview reads four figures at once (usage, revenue, the paywall, webhook endpoints). */
export const callBudgetOf = (page: string): number => (page === 'overview' ? 4 : MAX_CALLS_PER_PAGE);
const SCREENSHOTS =
  process.env.MCPMETER_WRITE_SCREENSHOTS === '1' ? join(process.cwd(), 'docs', 'console') : undefined;

export interface Person {
  context: BrowserContext;
  page: Page;
  errors: string[];
}

/** A browser of its own (cookies apart); axe is injected past the CSP by the test alone. */
export async function newPerson(browser: Browser): Promise<Person> {
  const context = await browser.newContext({ bypassCSP: true, viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    // A refused call is logged by Chromium as a failed resource; the page shows it as a problem.
    if (message.type() === 'error' && !message.text().includes('the server responded with a status of'))
      errors.push(message.text());
  });
  return { context, page, errors };
}

/** Serious or critical accessibility violations of the page as it is now. */
export async function axeFindings(page: Page): Promise<string[]> {
  await page.addScriptTag({ content: AXE });
  return page.evaluate(async () => {
    const axe = (
      globalThis as unknown as {
        axe: { run(): Promise<{ violations: Array<{ id: string; impact: string; nodes: unknown[] }> }> };
      }
    ).axe;
    return (await axe.run()).violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.impact} ${v.id} (${v.nodes.length})`);
  });
}

export const heading = (page: Page, name: string) => page.getByRole('heading', { level: 1, name }).waitFor();

/** Does `act` (a click that opens a page) and answers the API calls the page made to render. */
export async function counting(page: Page, title: string, act: () => Promise<void>): Promise<string[]> {
  const calls: string[] = [];
  const listener = (request: { url(): string; method(): string }) => {
    const path = new URL(request.url()).pathname;
    if (path.startsWith('/v1/') || path.startsWith('/ui/')) calls.push(`${request.method()} ${path}`);
  };
  page.on('request', listener);
  await act();
  await heading(page, title);
  await page.waitForLoadState('networkidle');
  page.off('request', listener);
  return calls;
}

/** Follows a link of the navigation named `nav` and answers the API calls the page made to render. */
export const visit = (page: Page, link: string, title: string, nav = 'Console') =>
  counting(page, title, () =>
    page.getByRole('navigation', { name: nav }).getByRole('link', { name: link }).click(),
  );

export async function shoot(page: Page, name: string) {
  if (SCREENSHOTS === undefined) return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** The session's CSRF token, read as the console reads it, for a call the test makes itself. */
export async function csrfOf(page: Page, baseUrl: string): Promise<string> {
  const session = await page.request.get(`${baseUrl}/v1/console/session`);
  return ((await session.json()) as { csrfToken: string }).csrfToken;
}

/**
 * What on the page the keyboard cannot reach: every visible, enabled control (links, buttons,
 * inputs, selects, text areas, disclosure summaries) must take focus by Tab alone. A radio group
 * is one stop (its checked radio; arrows move within it). Answers the unreached, described.
 */
export async function unreachableByKeyboard(page: Page): Promise<string[]> {
  const total = await page.evaluate(() => {
    // The page's own DOM, typed loosely: the test compiles without the DOM library.
    const doc = (globalThis as unknown as { document: { querySelectorAll(s: string): Iterable<unknown> } })
      .document;
    type Control = {
      disabled?: boolean;
      tabIndex: number;
      type?: string;
      name?: string;
      checked?: boolean;
      getClientRects(): { length: number };
      closest(s: string): unknown;
      setAttribute(n: string, v: string): void;
      removeAttribute(n: string): void;
    };
    const all = [
      ...doc.querySelectorAll('a[href],button,input,select,textarea,summary,[tabindex]'),
    ] as Control[];
    const checkedGroups = new Set(all.filter((e) => e.type === 'radio' && e.checked).map((e) => e.name));
    const controls = all.filter(
      (e) =>
        e.disabled !== true &&
        e.tabIndex >= 0 &&
        e.type !== 'hidden' &&
        e.closest('fieldset:disabled') === null &&
        e.getClientRects().length > 0 &&
        !(e.type === 'radio' && !e.checked && checkedGroups.has(e.name)),
    );
    for (const e of all) e.removeAttribute('data-kb');
    controls.forEach((e, i) => {
      e.setAttribute('data-kb', String(i));
    });
    return controls.length;
  });
  const focused = () =>
    page.evaluate(
      () =>
        (
          globalThis as unknown as {
            document: { activeElement: { getAttribute(n: string): string | null } | null };
          }
        ).document.activeElement?.getAttribute('data-kb') ?? null,
    );
  // From the first control on (a click elsewhere moves where Tab starts from).
  if (total === 0) return [];
  await page.locator('[data-kb="0"]').focus();
  const seen = new Set<string>(['0']);
  for (let i = 0; i < total + 25 && seen.size < total; i++) {
    await page.keyboard.press('Tab');
    const id = await focused();
    if (id !== null) seen.add(id);
  }
  const missed: string[] = [];
  for (let i = 0; i < total; i++)
    if (!seen.has(String(i)))
      missed.push(
        await page
          .locator(`[data-kb="${i}"]`)
          .evaluate((e) => (e as unknown as { outerHTML: string }).outerHTML.slice(0, 120)),
      );
  return missed;
}
