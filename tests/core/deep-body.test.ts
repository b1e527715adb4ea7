/**
 * Chat bodies nested deeper than MAX_JSON_DEPTH (src/body.ts), against the compiled binary: each
 * is refused with its 400 before it is parsed or admitted, so a flood of them from an anonymous
 * caller neither spends its rate limit nor stops the gateway answering others; each refusal is held
 * back HOSTILE_BODY_HOLD_MS, so one connection cannot send them at full speed; a body exactly at
 * the limit, or with any number of brackets inside its strings, is served.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { HOSTILE_BODY_HOLD_MS, MAX_JSON_DEPTH } from "../../src/body";

let gateway: RunningGateway;
let upstream: MockUpstream;

beforeAll(async () => {
  upstream = startMockUpstream();
  gateway = await startGateway(`
[limits]
anonymous = { per_minute = 1, per_day = 1000 }

[[upstreams]]
name = "mock"
base_url = "${upstream.url}"

[[models]]
id = "free-model"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]
`);
});

afterAll(async () => {
  await gateway?.stop();
  upstream?.stop();
});

/** A chat body whose `x` is `arrays` arrays inside one another (the body itself is one level more). */
function nestedBody(arrays: number): string {
  return `{"model":"free-model","x":${"[".repeat(arrays)}${"]".repeat(arrays)},"messages":[{"role":"user","content":"hi"}]}`;
}

function chat(body: string, key?: string): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key !== undefined) headers.authorization = `Bearer ${key}`;
  return fetch(`${gateway.url}/v1/chat/completions`, { method: "POST", headers, body });
}

test("eight bodies 100,000 levels deep are each refused with the 400 before admission; health and the caller's next request are answered", async () => {
  const bombs = Array.from({ length: 8 }, () => chat(nestedBody(100_000)));
  const health = fetch(`${gateway.url}/api/health`);
  const refused = await Promise.all(
    bombs.map(async (sent) => {
      const r = await sent;
      return { status: r.status, body: (await r.json()) as { error: Record<string, unknown> } };
    }),
  );
  expect((await health).status).toBe(200);
  for (const r of refused) {
    expect(r.status).toBe(400);
    expect(r.body.error).toEqual({
      message: `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`,
      type: "invalid_request_error",
      param: null,
      code: "invalid_request_error",
    });
  }
  // None was admitted: the anonymous caller's one request a minute is still there, and no upstream saw a bomb.
  expect(upstream.chatCount()).toBe(0);
  const next = await chat('{"model":"free-model","messages":[{"role":"user","content":"hi"}]}');
  expect(next.status).toBe(200);
  expect(upstream.chatCount()).toBe(1);
});

test("a refused bomb is answered only after its hold, so bombs sent one after another come no faster than one per hold; others are answered meanwhile", async () => {
  const started = performance.now();
  let answered = 0;
  const oneAfterAnother = (async () => {
    for (let i = 0; i < 3; i++) {
      const res = await chat(nestedBody(100_000));
      expect(res.status).toBe(400);
      await res.text();
      answered += 1;
    }
  })();
  expect((await fetch(`${gateway.url}/api/health`)).status).toBe(200);
  expect(answered).toBeLessThan(3);
  await oneAfterAnother;
  expect(performance.now() - started).toBeGreaterThanOrEqual(3 * HOSTILE_BODY_HOLD_MS);
});

test("a body exactly MAX_JSON_DEPTH deep is served; one level more is refused; brackets inside strings do not count", async () => {
  const { key } = await createUserKey(gateway, { email: "deep@example.com" });
  expect((await chat(nestedBody(MAX_JSON_DEPTH - 1), key)).status).toBe(200);
  expect((await chat(nestedBody(MAX_JSON_DEPTH), key)).status).toBe(400);
  const brackets = "[{".repeat(50_000);
  const inStrings = await chat(`{"model":"free-model","messages":[{"role":"user","content":"${brackets}\\"${brackets}"}]}`, key);
  expect(inStrings.status).toBe(200);
});
