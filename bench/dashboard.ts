/**
 * Dashboard speed on loopback, measured (never asserted): for every page, the time to the full
 * HTML over fetch (median of 50) and chromium's first contentful paint (median of 5 loads in one
 * tab after a warm-up load, as when clicking through; Debian's /usr/bin/chromium). The sign-in
 * page is measured signed out, the others signed in. Run alone: `bun bench/dashboard.ts` after `make build`.
 * Every child process is ended before returning.
 */
import { startGateway } from "../tests/support/binary";
import { startMockUpstream } from "../tests/support/mock-upstream";
import { launchBrowser } from "../tests/support/browser";
import { benchDir } from "./processes";

const PAGES = ["/dashboard/signin", "/dashboard/keys", "/dashboard/usage", "/dashboard/models", "/dashboard/playground"];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

export async function runDashboardBench(): Promise<string> {
  const mock = startMockUpstream();
  const gw = await startGateway(
    `
[auth]
signup = "open"
[[upstreams]]
name = "mock"
base_url = "${mock.url}"
[[models]]
id = "mock-small"
targets = [{ upstream = "mock" }]
free = true
`,
    { dir: benchDir("modelgate-bench-") },
  );
  let browser: Awaited<ReturnType<typeof launchBrowser>> | null = null;
  try {
    browser = await launchBrowser();
    const signup = await fetch(`${gw.url}/auth/signup`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json", origin: gw.url },
      body: JSON.stringify({ email: "bench@example.com", password: "bench-password" }),
    });
    const cookie = (signup.headers.get("set-cookie") ?? "").split(";")[0];
    if (!cookie.startsWith("mg_session=")) throw new Error(`sign-up failed: ${signup.status} ${await signup.text()}`);
    await browser.context.addCookies([{ name: "mg_session", value: cookie.slice("mg_session=".length), url: gw.url }]);

    const rows: string[] = ["| Page | HTML over fetch, p50 | First contentful paint, p50 | Bytes |", "|---|---:|---:|---:|"];
    for (const path of PAGES) {
      const times: number[] = [];
      let bytes = 0;
      const headers: Record<string, string> = path === "/dashboard/signin" ? {} : { cookie };
      for (let i = 0; i < 50; i++) {
        const started = performance.now();
        const response = await fetch(`${gw.url}${path}`, { headers, redirect: "manual" });
        bytes = (await response.text()).length;
        times.push(performance.now() - started);
      }
      const paints: number[] = [];
      const page = await browser.context.newPage();
      if (path === "/dashboard/signin") await browser.context.clearCookies();
      await page.goto(`${gw.url}${path}`, { waitUntil: "load" });
      for (let i = 0; i < 5; i++) {
        await page.goto(`${gw.url}${path}`, { waitUntil: "load" });
        const fcp = (await page.evaluate(
          `new Promise((resolve) => new PerformanceObserver((list) => { const e = list.getEntriesByName("first-contentful-paint")[0]; if (e) resolve(e.startTime); }).observe({ type: "paint", buffered: true }))`,
        )) as number;
        paints.push(fcp);
      }
      await page.close();
      if (path === "/dashboard/signin") await browser.context.addCookies([{ name: "mg_session", value: cookie.slice("mg_session=".length), url: gw.url }]);
      rows.push(`| ${path} | ${median(times).toFixed(2)} ms | ${median(paints).toFixed(1)} ms | ${bytes} |`);
    }
    return ["### Dashboard (bench/dashboard.ts)", "", ...rows].join("\n");
  } finally {
    await browser?.close();
    await gw.stop();
    mock.stop();
  }
}

if (import.meta.main) console.log(await runDashboardBench());
