/**
 * Swagger UI in a real browser (Debian's chromium) against the compiled binary, as someone
 * exploring the API uses it: every asset comes from the gateway (the browser's only route out is a
 * dead proxy), the page logs no error, and "Try it out" then "Execute" shows each answer — the
 * service operations anonymously, and the chat operation's own example with an API key
 * (regressions: operations without declared responses showed nothing after Execute; the example
 * body named the model "string").
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Locator } from "playwright-core";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { expectText, launchBrowser, type TestBrowser } from "../support/browser";

let mock: MockUpstream;
let gw: RunningGateway;
let browser: TestBrowser;
const consoleErrors: string[] = [];

beforeAll(async () => {
  mock = startMockUpstream();
  gw = await startGateway(`
[[upstreams]]
name = "mock"
base_url = "${mock.url}"

[[models]]
id = "mock-paid"
targets = [{ upstream = "mock" }]
price = { prompt = 1, completion = 1 }

[[models]]
id = "mock-free"
targets = [{ upstream = "mock" }]
free = true
`);
  browser = await launchBrowser({ height: 1400 });
  browser.page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  await browser.page.goto(`${gw.url}/swagger`);
  await browser.page.waitForSelector(".opblock");
});

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
  mock?.stop();
});

/** Opens an operation, presses "Try it out" and "Execute", and returns the live answer's row. */
async function execute(operation: string): Promise<Locator> {
  const block = browser.page.locator(`#operations-${operation}`);
  await block.locator(".opblock-summary-control").first().click();
  await block.locator("button.try-out__btn").click();
  await block.locator("button.execute").click();
  return block.locator(".live-responses-table tr.response").first();
}

describe("Swagger UI in chromium", () => {
  test("the service operations show their answers after Execute", async () => {
    const shows = { "service-getHealth": '"timestamp"', "service-getStatus": '"interface_version"', "models-listModels": '"mock-free"' };
    for (const [operation, text] of Object.entries(shows)) {
      const answer = await execute(operation);
      await expectText(answer.locator(".response-col_status"), "200");
      expect(await answer.locator(".response-col_description").innerText()).toContain(text);
    }
  });

  test("with an API key in Authorize, the chat operation's example body is answered as it is", async () => {
    const { key } = await createUserKey(gw, { credits: "10" });
    const page = browser.page;
    await page.click(".btn.authorize");
    const bearer = page.locator(".modal-ux .auth-container").filter({ hasText: "bearer" }).first();
    await bearer.locator("input").first().fill(key);
    await bearer.locator("button.authorize").click();
    await page.locator(".modal-ux button.close-modal").click();
    const answer = await execute("chat-createChatCompletion");
    await expectText(answer.locator(".response-col_status"), "200");
    expect(await answer.locator(".response-col_description").innerText()).toContain("chat.completion");
    expect(await answer.innerText()).toContain("x-ratelimit-remaining-requests");
    await browser.screenshot("swagger-chat-executed");
  });

  test("nothing on the page failed to load", () => {
    expect(consoleErrors).toEqual([]);
  });
});
