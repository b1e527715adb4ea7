import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { buildTestApp, type TestApp } from "../support/app";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

let mock: MockUpstream;
let t: TestApp;
const user = [{ role: "user", content: "hi" }];

beforeAll(() => {
  mock = startMockUpstream();
  t = buildTestApp({
    server: { max_body_bytes: 2048 },
    upstreams: [{ name: "mock", base_url: mock.url, api_key: "upstream-secret" }],
    models: [
      { id: "m1", targets: [{ upstream: "mock", model: "mock-small" }], free: true },
      { id: "org/m2:8b", aliases: ["m2"], targets: [{ upstream: "mock", model: "mock-small" }], price: { prompt: 2, completion: 3 } },
    ],
  });
});
afterAll(() => mock.stop());

async function errorBody(res: Response) {
  expect(res.headers.get("content-type")).toContain("application/json");
  const body = (await res.json()) as { error: { message: string; type: string; param: string | null; code: string } };
  expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
  return body.error;
}

describe("POST /v1/chat/completions validation", () => {
  const cases: Array<[string, unknown, RegExp]> = [
    ["missing model", { messages: user }, /model/],
    ["empty model", { model: "", messages: user }, /model/],
    ["missing messages", { model: "m1" }, /messages/],
    ["empty messages", { model: "m1", messages: [] }, /messages/],
    ["bad role", { model: "m1", messages: [{ role: "robot", content: "x" }] }, /messages\[0\]\.role: must be one of system, developer, user, assistant, tool/],
    ["content a number", { model: "m1", messages: [{ role: "user", content: 5 }] }, /messages\[0\]\.content: expected string or array or null$/],
    ["missing content", { model: "m1", messages: [{ role: "user" }] }, /messages\[0\]\.content: required/],
    ["null content on a user message", { model: "m1", messages: [{ role: "user", content: null }] }, /messages\[0\]\.content: required/],
    [
      "null content on an assistant message without tool_calls",
      { model: "m1", messages: [...user, { role: "assistant", content: null }] },
      /messages\[1\]\.content: required/,
    ],
    [
      "null content with empty tool_calls",
      { model: "m1", messages: [...user, { role: "assistant", content: null, tool_calls: [] }] },
      /messages\[1\]\.content: required/,
    ],
    ["stream not boolean", { model: "m1", messages: user, stream: "yes" }, /stream/],
    ["max_tokens not an integer", { model: "m1", messages: user, max_tokens: 1.5 }, /max_tokens: expected integer or null$/],
    ["max_tokens a numeric string", { model: "m1", messages: user, max_tokens: "5" }, /max_tokens: expected integer or null$/],
    ["max_tokens zero", { model: "m1", messages: user, max_tokens: 0 }, /max_tokens: expected integer to be greater or equal to 1/],
    ["temperature a string", { model: "m1", messages: user, temperature: "0.5" }, /temperature: expected number or null$/],
    ["stream_options a string", { model: "m1", messages: user, stream: true, stream_options: "usage" }, /stream_options: expected object or null$/],
    ["stream_options a list", { model: "m1", messages: user, stream: true, stream_options: [true] }, /stream_options: expected object or null$/],
    ["body an array", [1, 2], /body|model/],
  ];
  for (const [name, body, pattern] of cases) {
    test(`${name} -> 400 invalid_request_error`, async () => {
      const before = mock.chatCount();
      const res = await t.chat(body);
      expect(res.status).toBe(400);
      const error = await errorBody(res);
      expect(error.code).toBe("invalid_request_error");
      expect(error.message).toMatch(pattern);
      // param names the field the message names (as OpenAI's errors do), null for the body itself.
      const named = /^Invalid request body: ([^:]+):/.exec(error.message)?.[1];
      expect(error.param).toBe(named === undefined || named === "body" ? null : named);
      expect(mock.chatCount()).toBe(before);
    });
  }

  test("stream, temperature and max_tokens may be null, meaning not given, as OpenAI takes them (regression: 400)", async () => {
    const res = await t.chat({ model: "m1", messages: user, stream: null, temperature: null, max_tokens: null });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(mock.requests.at(-1)!.body).toMatchObject({ stream: null, temperature: null, max_tokens: null });
  });

  test("a tool-calling transcript is accepted: the assistant's tool call with content null or absent, then the tool's result (as the SDKs send it back)", async () => {
    const call = { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } };
    for (const assistant of [
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "assistant", tool_calls: [call] },
      { role: "assistant", content: null, function_call: call.function },
    ]) {
      const messages = [...user, assistant, { role: "tool", tool_call_id: "call_1", content: '{"temp":20}' }];
      const res = await t.chat({ model: "m1", messages });
      expect(res.status).toBe(200);
      expect(mock.requests.at(-1)!.body.messages[1]).toEqual(assistant);
    }
  });

  test("malformed JSON -> 400 naming JSON", async () => {
    const res = await t.chat("{not json");
    expect(res.status).toBe(400);
    expect((await errorBody(res)).message).toContain("not valid JSON");
  });

  test("empty body -> 400", async () => {
    const res = await t.chat("");
    expect(res.status).toBe(400);
    expect((await errorBody(res)).code).toBe("invalid_request_error");
  });

  test("body over max_body_bytes -> 413 payload_too_large", async () => {
    const res = await t.chat({ model: "m1", messages: [{ role: "user", content: "x".repeat(4096) }] });
    expect(res.status).toBe(413);
    expect((await errorBody(res)).code).toBe("payload_too_large");
  });

  test("chunked body over the limit without Content-Length -> 413", async () => {
    const big = new TextEncoder().encode(JSON.stringify({ model: "m1", messages: [{ role: "user", content: "y".repeat(4096) }] }));
    const body = new ReadableStream({
      start(controller) {
        for (let i = 0; i < big.length; i += 512) controller.enqueue(big.slice(i, i + 512));
        controller.close();
      },
    });
    const res = await t.app.handle(
      new Request("http://localhost/v1/chat/completions", { method: "POST", body, headers: { "content-type": "application/json" } }),
    );
    expect(res.status).toBe(413);
  });

  test("unknown model -> 404 model_not_found with param model", async () => {
    const res = await t.chat({ model: "nope", messages: user });
    expect(res.status).toBe(404);
    const error = await errorBody(res);
    expect(error).toMatchObject({ code: "model_not_found", param: "model" });
    expect(error.message).toContain('"nope"');
  });
});

describe("POST /v1/chat/completions routing", () => {
  test("routes to the target's model name, passes unknown properties through, returns the upstream JSON", async () => {
    const res = await t.chat({ model: "m1", messages: [{ role: "user", content: "hi", name: "ann" }], temperature: 0.2, seed: 7, logit_bias: { "42": 1 } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
    const body = (await res.json()) as any;
    expect(body.choices[0].message.content).toBe("Hello from the mock upstream.");
    const sent = mock.requests.at(-1)!;
    expect(sent.body).toMatchObject({ model: "mock-small", temperature: 0.2, seed: 7, logit_bias: { "42": 1 } });
    expect(sent.body.messages[0]).toEqual({ role: "user", content: "hi", name: "ann" });
    expect(sent.headers.authorization).toBe("Bearer upstream-secret");
  });

  test("non-streamed usage is captured and priced", async () => {
    const res = await t.chat({ model: "m2", messages: user });
    const body = (await res.json()) as any;
    const record = t.records.find((r) => r.requestId === res.headers.get("x-request-id"))!;
    expect(record).toMatchObject({ model: "org/m2:8b", upstream: "mock", status: 200, promptTokens: body.usage.prompt_tokens, completionTokens: 6 });
    expect(record.costMicro).toBe(body.usage.prompt_tokens * 2 + 6 * 3);
  });

  test("streaming relays every chunk, ends with [DONE], strips the usage chunk the client did not ask for", async () => {
    const res = await t.chat({ model: "m1", messages: user, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const text = await res.text();
    const events = text.split("\n\n").filter(Boolean);
    expect(events.at(-1)).toBe("data: [DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Hello from the mock upstream.");
    expect(chunks.every((c) => c.choices.length > 0)).toBe(true);
    expect(mock.requests.at(-1)!.body.stream_options).toEqual({ include_usage: true });
    const record = t.records.find((r) => r.requestId === res.headers.get("x-request-id"))!;
    expect(record.completionTokens).toBe(6);
    expect(record.promptTokens).toBeGreaterThan(0);
  });

  test("streaming keeps the usage chunk when the client asked for it", async () => {
    const res = await t.chat({ model: "m1", messages: user, stream: true, stream_options: { include_usage: true } });
    const events = (await res.text()).split("\n\n").filter(Boolean);
    const usageChunk = JSON.parse(events.at(-2)!.slice(6));
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage.completion_tokens).toBe(6);
  });

  test("stream_options of null, or with options of its own, still gets include_usage upstream", async () => {
    for (const [given, sent] of [
      [null, { include_usage: true }],
      [{ continuous_usage_stats: false }, { continuous_usage_stats: false, include_usage: true }],
    ]) {
      const res = await t.chat({ model: "m1", messages: user, stream: true, stream_options: given });
      expect(res.status).toBe(200);
      expect((await res.text()).endsWith("data: [DONE]\n\n")).toBe(true);
      expect(mock.requests.at(-1)!.body.stream_options).toEqual(sent);
    }
  });
});

describe("service endpoints", () => {
  test("GET /api/health", async () => {
    const res = await t.request("/api/health");
    const body = (await res.json()) as any;
    expect(body.status).toBe("ok");
    expect(typeof body.timestamp).toBe("number");
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });

  test("GET /api/status carries version, uptime, interface version and upstream health", async () => {
    const body = (await (await t.request("/api/status")).json()) as any;
    expect(body).toMatchObject({ interface_version: "2026-06-16", version: "test" });
    expect(typeof body.uptime_s).toBe("number");
    expect(body.upstreams[0]).toMatchObject({ name: "mock", state: "closed" });
  });

  test("GET /v1/models lists routes with price and free-tier fields", async () => {
    const body = (await (await t.request("/v1/models")).json()) as any;
    expect(body.object).toBe("list");
    expect(body.data[0]).toMatchObject({ id: "m1", object: "model", owned_by: "mock", free: true, price: { prompt: 0, completion: 0 } });
    expect(body.data[1]).toMatchObject({ id: "org/m2:8b", free: false, price: { prompt: 2, completion: 3 } });
  });

  test("GET /v1/models/{id} answers one route by id (slashes as sent or encoded) or alias", async () => {
    for (const path of ["/v1/models/m1", "/v1/models/org/m2:8b", "/v1/models/org%2Fm2%3A8b", "/v1/models/m2"]) {
      const res = await t.request(path);
      expect(res.status).toBe(200);
      const body = (await res.json()) as any;
      expect(body).toMatchObject({ object: "model", owned_by: "mock" });
      expect(body.id).toBe(path === "/v1/models/m1" ? "m1" : "org/m2:8b");
    }
  });

  test("GET /v1/models/{id} of an unknown or malformed id is 404 model_not_found", async () => {
    for (const path of ["/v1/models/nope", "/v1/models/org", "/v1/models/%E0%A4%A"]) {
      const res = await t.request(path);
      expect(res.status).toBe(404);
      const error = await errorBody(res);
      expect(error.code).toBe("model_not_found");
      expect(error.param).toBe("model");
    }
  });

  test("unknown paths are 404 in the error shape", async () => {
    const res = await t.request("/v1/nothing-here");
    expect(res.status).toBe(404);
    expect((await errorBody(res)).code).toBe("not_found");
  });

  test("the OpenAPI document names the interface's operations", async () => {
    const doc = (await (await t.request("/swagger/json")).json()) as any;
    const ops = Object.values(doc.paths).flatMap((p: any) => Object.values(p).map((o: any) => o.operationId));
    expect(ops).toEqual(expect.arrayContaining(["getHealth", "getStatus", "listModels", "createChatCompletion"]));
    expect(doc.paths["/v1/chat/completions"].post.requestBody).toBeDefined();
    // The interface's Errors table for createChatCompletion, each in OpenAI's error shape.
    const responses = doc.paths["/v1/chat/completions"].post.responses;
    for (const status of ["200", "401", "402", "429"]) expect(responses[status]?.description).toBeString();
    expect(responses["429"].content["application/json"].schema.$ref).toBe("#/components/schemas/Error");
    expect(doc.components.schemas.Error.properties.error.required).toEqual(["message", "type", "param", "code"]);
  });

  test('every operation declares a response, and the chat example works as it is in Try it out (regression: Execute showed nothing; the example named model "string")', async () => {
    const doc = (await (await t.request("/swagger/json")).json()) as any;
    for (const [path, operations] of Object.entries(doc.paths) as Array<[string, Record<string, any>]>) {
      for (const [method, operation] of Object.entries(operations))
        expect(`${method} ${path}: ${Object.keys(operation.responses ?? {}).length > 0}`).toBe(`${method} ${path}: true`);
    }
    expect(doc.paths["/api/health"].get.responses["200"].content["application/json"].schema.required).toEqual(["status", "timestamp"]);
    // The model list as the interface has it: data, each entry with id and object (regression: any object).
    const list = doc.paths["/v1/models"].get.responses["200"].content["application/json"].schema;
    expect([list.required, list.properties.data.items.required]).toEqual([
      ["object", "data"],
      ["id", "object"],
    ]);
    const chat = doc.paths["/v1/chat/completions"].post;
    expect(Object.keys(chat.responses["200"].headers)).toContain("x-ratelimit-remaining-requests");
    expect(chat.responses["429"].headers["retry-after"]).toBeDefined();
    // What the gateway really sends is declared too (regression: no 403 for a foreign page, no overhead header).
    expect(Object.keys(chat.responses["200"].headers)).toContain("x-gateway-overhead-ms");
    expect(chat.responses["403"].description).toContain("another origin");
    const example = chat.requestBody.content["application/json"].example;
    const res = await t.request("/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(example) });
    expect(res.status).toBe(200);
    expect(doc.components.securitySchemes.session.description).toContain("sign in at /dashboard");
  });

  test("Swagger UI is served from embedded assets, no CDN, and not for framing by other sites (regression: it could be, unlike the dashboard)", async () => {
    const page = await t.request("/swagger");
    expect([page.headers.get("x-frame-options"), page.headers.get("x-content-type-options")]).toEqual(["DENY", "nosniff"]);
    const html = await page.text();
    expect(html).toContain("/swagger/assets/swagger-ui-bundle.js");
    expect(html).not.toMatch(/unpkg|jsdelivr|cdn\./);
    // The document's URL is absolute, so the page also works opened as /swagger/ (regression: "swagger/json").
    expect(html).toContain('"url":"/swagger/json"');
    expect(html).not.toContain('"url":"swagger/json"');
    expect(await (await t.request("/swagger/")).text()).toContain('"url":"/swagger/json"');
    const js = await t.request("/swagger/assets/swagger-ui-bundle.js");
    expect(js.status).toBe(200);
    expect((await js.text()).length).toBeGreaterThan(100_000);
    // The favicon every page load asks for: no 404 in the browser's console.
    expect((await t.request("/favicon.ico")).status).toBe(204);
  });
});
