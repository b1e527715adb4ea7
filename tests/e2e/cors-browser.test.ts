/**
 * CORS in a real browser (Debian's chromium through playwright-core) against the compiled binary:
 * a page served from a listed origin calls the chat API with an API key, streamed and not, and
 * reads the rate-limit headers; a page from another origin is stopped by the browser itself.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Server } from "bun";
import { createUserKey, freePort, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { launchBrowser, type TestBrowser } from "../support/browser";
import { modelsToml } from "../auth/support";

let mock: MockUpstream;
let gw: RunningGateway;
let browser: TestBrowser;
let listed: Server<undefined>;
let other: Server<undefined>;
let key = "";

/** A page server on its own origin (a port of its own): an empty page the test scripts. */
function pageServer(): Server<undefined> {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: freePort(),
    fetch: () => new Response("<!doctype html><title>chat</title>", { headers: { "content-type": "text/html" } }),
  });
}

beforeAll(async () => {
  mock = startMockUpstream();
  listed = pageServer();
  other = pageServer();
  gw = await startGateway(`cors_origins = ["http://127.0.0.1:${listed.port}"]\n${modelsToml(mock.url)}`);
  key = (await createUserKey(gw, { credits: "1" })).key;
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
  mock?.stop();
  listed?.stop(true);
  other?.stop(true);
});

/** Runs a chat call from a page of `origin` (streamed when `stream`); what the page could read, or the error it got. */
async function callFrom(origin: string, stream: boolean): Promise<{ status?: number; remaining?: string | null; text?: string; error?: string }> {
  await browser.page.goto(origin);
  return browser.page.evaluate(
    async ({ url, key, stream }) => {
      try {
        const res = await fetch(url, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "paid-model", messages: [{ role: "user", content: "hi" }], stream }),
        });
        return { status: res.status, remaining: res.headers.get("x-ratelimit-remaining-requests"), text: await res.text() };
      } catch (err) {
        return { error: String(err) };
      }
    },
    { url: `${gw.url}/v1/chat/completions`, key, stream },
  );
}

test("a page of a listed origin calls the API with a key and reads the answer and its headers; another origin is refused by the browser", async () => {
  const plain = await callFrom(`http://127.0.0.1:${listed.port}/`, false);
  expect(plain.status).toBe(200);
  expect(plain.remaining).toBe("59");
  expect(JSON.parse(plain.text!).choices[0].message.content).toBe("Hello from the mock upstream.");
  const streamed = await callFrom(`http://127.0.0.1:${listed.port}/`, true);
  expect(streamed.status).toBe(200);
  expect(streamed.text).toEndWith("data: [DONE]\n\n");
  const refused = await callFrom(`http://127.0.0.1:${other.port}/`, false);
  expect(refused.error).toContain("Failed to fetch");
});

test("a page of another origin that posts a form to the chat endpoint (no preflight needed) is refused, and nothing reaches the upstream (regression: served, blind, on the free models)", async () => {
  await browser.page.goto(`http://127.0.0.1:${other.port}/`);
  const before = mock.chatCount();
  const body = JSON.stringify({ model: "free-model", messages: [{ role: "user", content: "hi" }] });
  await browser.page.evaluate(
    ({ url, body }) => {
      const document = (globalThis as any).document;
      const form = document.createElement("form");
      form.method = "POST";
      form.action = url;
      form.enctype = "text/plain";
      const field = document.createElement("input");
      // A text/plain form sends `name=value`: the JSON is split so that the = lands inside a string.
      field.name = `${body.slice(0, -1)},"pad":"`;
      field.value = '"}';
      form.append(field);
      document.body.append(form);
      form.submit();
    },
    { url: `${gw.url}/v1/chat/completions`, body },
  );
  await browser.page.waitForURL(`${gw.url}/v1/chat/completions`);
  const answer = JSON.parse(await browser.page.locator("body").innerText());
  expect(answer.error.code).toBe("forbidden");
  expect(mock.chatCount()).toBe(before);
});

test("preflights over the wire carry x-request-id, on the chat route and the others (regression: none had one)", async () => {
  const preflight = { method: "OPTIONS", headers: { origin: `http://127.0.0.1:${listed.port}`, "access-control-request-method": "POST" } };
  for (const path of ["/v1/chat/completions", "/v1/models", "/api/status"]) {
    const res = await fetch(`${gw.url}${path}`, preflight);
    expect(res.status).toBe(204);
    expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
  }
});
