/**
 * A real browser for the dashboard tests: Debian's chromium (/usr/bin/chromium, installed by
 * scripts/ensure-debian.sh from `make test`) driven headless by playwright-core, with a fresh
 * profile directory per launch. Never a downloaded browser. One browser serves a whole test file;
 * `signOut()` clears its cookies so the next test can act as someone else.
 */
import { chromium, type BrowserContext, type Locator, type Page } from "playwright-core";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const SCREENSHOTS = resolve(import.meta.dir, "../../test-output/screenshots");

const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  /** Saves a full-page screenshot as test-output/screenshots/NAME.png. */
  screenshot(name: string, options?: { page?: Page }): Promise<string>;
  /** Forgets every cookie (the next page load is signed out). */
  signOut(): Promise<void>;
  close(): Promise<void>;
}

export async function launchBrowser(options: { width?: number; height?: number } = {}): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: run scripts/ensure-debian.sh chromium:/usr/bin/chromium (make test does) to install Debian's chromium`);
  }
  const profile = mkdtempSync(join(tmpdir(), "modelgate-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: options.width ?? 1100, height: options.height ?? 800 },
    // Only loopback traffic: anything else would be a bug in a page (a CDN, a font).
    proxy: { server: "http://127.0.0.1:9", bypass: "127.0.0.1,localhost" },
  });
  context.setDefaultTimeout(10_000);
  const page = context.pages()[0] ?? (await context.newPage());
  mkdirSync(SCREENSHOTS, { recursive: true });
  return {
    context,
    page,
    async screenshot(name, opts = {}) {
      const path = join(SCREENSHOTS, `${name}.png`);
      await (opts.page ?? page).screenshot({ path, fullPage: true });
      return path;
    },
    async signOut() {
      await context.clearCookies();
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Waits until `read()` satisfies `check`, polling the page (the DOM changes as responses and
 * streams arrive); fails with the last value seen. Waiting for a condition, never for time.
 */
export async function eventually<T>(read: () => Promise<T>, check: (value: T) => boolean, what: string, options: { timeoutMs?: number } = {}): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let last: T | undefined;
  for (;;) {
    last = await read().catch(() => undefined as T);
    if (last !== undefined && check(last)) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(last)}`);
    await Bun.sleep(25);
  }
}

export function expectText(locator: Locator, text: string | RegExp, options: { exact?: boolean } = {}): Promise<string> {
  const matches = (actual: string): boolean =>
    typeof text === "string" ? (options.exact ? actual.trim() === text : actual.includes(text)) : text.test(actual);
  return eventually(async () => (await locator.first().textContent()) ?? "", matches, `${locator} to have text ${text}`);
}

export function expectAttribute(locator: Locator, name: string, value: string): Promise<string | null> {
  return eventually(
    () => locator.first().getAttribute(name),
    (v) => v === value,
    `${locator} to have ${name}="${value}"`,
  );
}

export function expectCount(locator: Locator, count: number): Promise<number> {
  return eventually(
    () => locator.count(),
    (n) => n === count,
    `${locator} to match ${count} element(s)`,
  );
}
