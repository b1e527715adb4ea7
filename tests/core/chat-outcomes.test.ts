/**
 * How refused and failed chat requests end, in process with the real gate: a body nested too
 * deeply (refused before admission, so no credit is held), the
 * identity a rate-limit or credit refusal is recorded with (regression: always "anonymous"), and
 * the headers of errors raised before admission.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { buildAuthApp, HELLO, jsonOf, payingUser, type AuthTestApp } from "../auth/support";

let t: AuthTestApp;
afterEach(() => t?.close());

/** HELLO with an extra property nested `depth` arrays deep. */
function nested(depth: number): string {
  return `{"model":"paid-model","max_tokens":1,"x":${"[".repeat(depth)}${"]".repeat(depth)},"messages":${JSON.stringify(HELLO.messages)}}`;
}

describe("chat outcomes", () => {
  test("a body nested too deeply is a 400 that holds no credit", async () => {
    t = buildAuthApp();
    // Enough for its prompt estimate (the body's bytes / 4): refused for its depth, not its price.
    const { userId, auth } = await payingUser(t, 1_000_000);
    const deep = await t.chat(nested(100_000), auth);
    expect(deep.status).toBe(400);
    expect((await jsonOf(deep)).error).toMatchObject({
      code: "invalid_request_error",
      message: "The request body nests arrays and objects more than 64 levels deep",
    });
    expect(t.upstream.chatCount()).toBe(0);
    expect(t.records.map((r) => [r.status, r.identity, r.costMicro])).toEqual([[400, "api_key", 0]]);
    // No hold is left: the next request is admitted and served.
    expect(t.identities.meter.available(userId, 1_000_000)).toBe(1_000_000);
    expect((await t.chat(HELLO, auth)).status).toBe(200);
  });

  test("a rate-limit or credit refusal of an API key is recorded as that key", async () => {
    t = buildAuthApp({ limits: { api_key: { per_minute: 1 } } });
    const { auth } = await payingUser(t, 0);
    const keyId = (t.deps.db.$client.query("SELECT id FROM api_keys").get() as { id: string }).id;
    expect((await t.chat(HELLO, auth)).status).toBe(402);
    expect((await t.chat(HELLO, auth)).status).toBe(429);
    expect(t.records.map((r) => [r.status, r.identity, r.keyId, r.userId !== null])).toEqual([
      [402, "api_key", keyId, true],
      [429, "api_key", keyId, true],
    ]);
    expect((await t.chat(HELLO)).status).toBe(401);
    expect(t.records[2]).toMatchObject({ status: 401, identity: "anonymous", keyId: null, userId: null });
  });

  test("an answer that breaks off after its headers is a 502 that still carries the x-ratelimit headers", async () => {
    // An upstream that promises 500 bytes, sends one and closes.
    const listener = Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      socket: { data: (socket) => void socket.end("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{") },
    });
    try {
      t = buildAuthApp({ upstreams: [{ name: "mock", base_url: `http://127.0.0.1:${listener.port}/v1` }] });
      const { auth } = await payingUser(t, 0);
      const response = await t.chat({ model: "free-model", messages: HELLO.messages }, auth);
      expect(response.status).toBe(502);
      expect((await jsonOf(response)).error.message).toContain("broke off its answer");
      expect(response.headers.get("content-type")).toBe("application/json");
      expect(response.headers.get("x-ratelimit-limit-requests")).toBe("60");
      expect(response.headers.get("x-ratelimit-remaining-requests")).toBe("59");
      expect(response.headers.get("x-request-id")).toStartWith("req_");
      expect(t.records.map((r) => [r.status, r.identity])).toEqual([[502, "api_key"]]);
    } finally {
      listener.stop(true);
    }
  });

  test("an answer past MAX_ANSWER_BYTES is a 502 naming the limit, held against the upstream", async () => {
    const endless = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () =>
        new Response(new ReadableStream({ pull: (controller) => controller.enqueue(new Uint8Array(1024 * 1024).fill(32)) }), {
          headers: { "content-type": "application/json" },
        }),
    });
    try {
      t = buildAuthApp({ upstreams: [{ name: "mock", base_url: `http://127.0.0.1:${endless.port}/v1` }] });
      const response = await t.chat({ model: "free-model", messages: HELLO.messages });
      expect(response.status).toBe(502);
      expect((await jsonOf(response)).error.message).toBe('upstream "mock" answered more than 32 MiB');
      expect(t.deps.registry.upstreams.get("mock")!.lastError).toBe('upstream "mock" answered more than 32 MiB');
    } finally {
      endless.stop(true);
    }
  });

  test("requests refused before admission are recorded too, with no model; refusals are recorded as the kind of credential presented, not as anonymous", async () => {
    t = buildAuthApp();
    const { auth } = await payingUser(t, 0);
    const sent = [
      await t.chat("{not json"),
      await t.chat({ model: "no-such-model", messages: HELLO.messages }, auth),
      await t.chat({ ...HELLO, model: "free-model" }, { authorization: "Bearer sk-mg-garbage" }),
      await t.chat("{not json", { cookie: "mg_session=forged", origin: "http://localhost" }),
      await t.chat(HELLO, { "x-payment-signature": "{}" }),
    ];
    expect(sent.map((r) => r.status)).toEqual([400, 404, 401, 401, 401]);
    expect(t.records.map((r) => [r.requestId === sent[t.records.indexOf(r)].headers.get("x-request-id"), r.status, r.identity, r.model])).toEqual([
      [true, 400, "anonymous", ""],
      [true, 404, "api_key", ""],
      [true, 401, "api_key", "free-model"],
      [true, 401, "session", ""],
      [true, 401, "spend_auth", "paid-model"],
    ]);
  });

  test("errors raised before admission carry x-request-id and x-gateway-overhead-ms", async () => {
    t = buildAuthApp();
    for (const [body, status] of [
      ["not json", 400],
      [{ model: "nope", messages: HELLO.messages }, 404],
      [{ model: "free-model" }, 400],
    ] as const) {
      const response = await t.chat(body);
      expect(response.status).toBe(status);
      expect(response.headers.get("x-request-id")).toStartWith("req_");
      expect(response.headers.get("x-gateway-overhead-ms")).toMatch(/^\d+\.\d{2}$/);
    }
  });
});
