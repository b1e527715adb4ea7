/**
 * Key policy in the dashboard, in Chromium against the compiled binary: a key created with a
 * policy in the form is enforced on the API, the keys table shows it with its spend, an edit in
 * the table applies from the next request, a malformed field is refused naming the field, an
 * administrator edits another user's key, the usage page's "Download CSV" gives one row per
 * request, and the request log page filters by model.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import type { Page } from "playwright-core";
import { startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { expectCount, expectText, launchBrowser, type TestBrowser } from "../support/browser";

const ADMIN = { email: "root@example.com", password: "admin-password-1" };
let mock: MockUpstream;
let gw: RunningGateway;
let browser: TestBrowser;
let page: Page;

beforeAll(async () => {
  mock = startMockUpstream();
  gw = await startGateway(`
[[upstreams]]
name = "mock"
base_url = "${mock.url}"

[[models]]
id = "mock-small"
targets = [{ upstream = "mock" }]
price = { prompt = 1, completion = 1 }

[[models]]
id = "mock-large"
targets = [{ upstream = "mock" }]
price = { prompt = 1000, completion = 2000 }
`);
  for (const args of [
    ["user", "add", ADMIN.email, "--admin", "--password-stdin"],
    ["credits", "grant", "--user", ADMIN.email, "--amount", "100"],
  ]) {
    const result = await gw.cli(args, args.includes("--password-stdin") ? `${ADMIN.password}\n` : undefined);
    if (result.code !== 0) throw new Error(result.stderr);
  }
  browser = await launchBrowser();
  page = browser.page;
  await page.goto(`${gw.url}/dashboard/signin`);
  await page.getByLabel("Email").fill(ADMIN.email);
  await page.getByLabel("Password").fill(ADMIN.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/dashboard\/keys/);
});

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
  mock?.stop();
});

const chat = (key: string, model: string) =>
  fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "zebra-prompt" }] }),
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

let key = "";

test("a policy set in the create form is enforced, and shown in the keys table", async () => {
  await page.getByLabel(/^Name/).fill("child");
  await page.getByText("Policy (optional)").click();
  await page.locator("#key-models").fill("mock-small");
  await page.locator("#key-budget").fill("1/day");
  await page.locator("#key-budget").fill("1/fortnight");
  await page.getByRole("button", { name: "Create key" }).click();
  await expectText(page.locator(".notice, [role=alert]"), "Budget:");
  await page.locator("#key-budget").fill("1/day");
  await page.getByRole("button", { name: "Create key" }).click();
  key = await page.locator("#new-key").inputValue();
  expect(key).toStartWith("sk-mg-");
  await browser.screenshot("key-policy-created");
  expect((await chat(key, "mock-small")).status).toBe(200);
  const denied = await chat(key, "mock-large");
  expect(denied.status).toBe(403);
  expect(denied.body.error.code).toBe("model_not_allowed");
  await page.goto(`${gw.url}/dashboard/keys`);
  await expectText(page.locator("#keys tr", { hasText: "child" }).locator(".policy"), "models mock-small; budget 1.000000/day");
});

test("an edit in the table applies from the next request; an administrator edits any user's key", async () => {
  const row = page.locator("#keys tr", { hasText: "child" });
  await row.getByText("Edit policy").click();
  await row.getByLabel("Models").fill("");
  await row.getByRole("button", { name: "Save policy" }).click();
  await expectText(page.locator("main"), "The key's policy was saved");
  expect((await chat(key, "mock-large")).status).toBe(200);

  await page.goto(`${gw.url}/dashboard/admin`);
  const adminRow = page.locator("#keys tr", { hasText: "child" });
  await adminRow.getByText("Edit policy").click();
  await adminRow.getByLabel("Models").fill("mock-s*");
  await adminRow.getByRole("button", { name: "Save policy" }).click();
  await expectText(page.locator("main"), "The key's policy was saved");
  expect((await chat(key, "mock-large")).status).toBe(403);
});

test("Download CSV on the usage page has one row per logged request, and the request log filters by model", async () => {
  const deadline = Date.now() + 10_000;
  let rows: string[] = [];
  while (rows.length < 4 && Date.now() < deadline) {
    await page.goto(`${gw.url}/dashboard/usage`);
    const download = page.waitForEvent("download");
    await page.getByRole("link", { name: "Download CSV", exact: true }).click();
    const file = await (await download).path();
    rows = readFileSync(file, "utf8").trimEnd().split("\r\n").slice(1);
  }
  // Two answered requests and two refused by the allowlist, all logged.
  expect(rows).toHaveLength(4);
  expect(rows.filter((r) => r.includes(",200,"))).toHaveLength(2);
  expect(rows.filter((r) => r.includes(",403,"))).toHaveLength(2);
  expect(rows.every((r) => r.includes("child"))).toBe(true);

  await page.goto(`${gw.url}/dashboard/requests`);
  await page.getByLabel("Model").fill("mock-large");
  await page.getByRole("button", { name: "Filter" }).click();
  await expectCount(page.locator("#requests tbody tr"), rows.filter((r) => r.includes(",mock-large,")).length);
  await browser.screenshot("request-log");
  expect(await page.locator("#requests").textContent()).not.toContain("zebra-prompt");
});
