/**
 * /v1/messages and /v1/messages/count_tokens on the compiled binary over loopback, through the
 * official @anthropic-ai/sdk, each case in both modes: "native" (the upstream lists messages in
 * `native` and gets the body as it came) and "translated" (a chat upstream, the gateway
 * translating both ways). The mock upstream speaks both wire formats.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { MOCK_TOOL_INPUT } from "../support/mock-anthropic";
import { eventually } from "../support/eventually";

let mock: MockUpstream;
let broken: MockUpstream;
let breaking: MockUpstream;
let gw: RunningGateway;
let key: string;

const config = (url: string, brokenUrl: string, breakingUrl: string) => `
[limits]
api_key = { per_minute = 10000 }

[routing]
retry_backoff_ms = 0
max_attempts = 1

[[upstreams]]
name = "anthropic-like"
base_url = "${url}"
native = ["messages"]

[[upstreams]]
name = "chat-only"
base_url = "${url}"

[[upstreams]]
name = "broken-native"
base_url = "${brokenUrl}"
native = ["messages"]

[[upstreams]]
name = "broken-chat"
base_url = "${brokenUrl}"

[[upstreams]]
name = "breaking-native"
base_url = "${breakingUrl}"
native = ["messages"]

[[upstreams]]
name = "breaking-chat"
base_url = "${breakingUrl}"

[[models]]
id = "native-breaks"
targets = [{ upstream = "breaking-native", model = "mock-small" }]
free = true

[[models]]
id = "translated-breaks"
targets = [{ upstream = "breaking-chat", model = "mock-small" }]
free = true

[[models]]
id = "native"
targets = [{ upstream = "anthropic-like", model = "mock-small" }]
price = { prompt = 1000, completion = 2000 }

[[models]]
id = "translated"
targets = [{ upstream = "chat-only", model = "mock-small" }]
price = { prompt = 1000, completion = 2000 }

[[models]]
id = "native-broken"
targets = [{ upstream = "broken-native", model = "mock-small" }]
free = true

[[models]]
id = "translated-broken"
targets = [{ upstream = "broken-chat", model = "mock-small" }]
free = true
`;

const MODES: Array<"native" | "translated"> = ["native", "translated"];

beforeAll(async () => {
  mock = startMockUpstream({ callTool: true });
  broken = startMockUpstream({ failWith: 500 });
  breaking = startMockUpstream({ breakAfterChunks: 2, chunkDelayMs: 20 });
  gw = await startGateway(config(mock.url, broken.url, breaking.url));
  key = (await createUserKey(gw, { name: "anthropic", credits: "100" })).key;
});

afterAll(async () => {
  await gw?.stop();
  mock?.stop();
  broken?.stop();
  breaking?.stop();
});

function client(apiKey = key): Anthropic {
  return new Anthropic({ baseURL: gw.url, apiKey, maxRetries: 0 });
}

/** The error an SDK call fails with. */
async function failure(call: PromiseLike<unknown>): Promise<Error & { status?: number; error?: { type: string; error: { type: string; message: string } } }> {
  try {
    await call;
  } catch (err) {
    return err as Error;
  }
  throw new Error("the call succeeded");
}

/** The user's request-log rows, once `count` are written (they are written behind the answers). */
async function usageRows(email: string, count: number): Promise<Array<Record<string, unknown>>> {
  let rows: Array<Record<string, unknown>> = [];
  await eventually(
    async () => {
      rows = JSON.parse((await gw.cli(["usage", "export", "--user", email, "--format", "json"])).stdout) as Array<Record<string, unknown>>;
      return rows.length >= count;
    },
    5_000,
    100,
  );
  return rows;
}

const hello = [{ role: "user" as const, content: "Hello" }];
const weather = [
  {
    name: "get_weather",
    description: "The weather in a city",
    input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] },
  },
];

describe.each(MODES)("@anthropic-ai/sdk, %s", (mode) => {
  test("messages.create: text, stop reason, usage; the upstream is called as the mode says", async () => {
    const before = mock.requests.length;
    const message = await client().messages.create({ model: mode, max_tokens: 100, messages: hello });
    expect(message.type).toBe("message");
    expect(message.model).toBe(mode === "native" ? "mock-small" : "translated");
    expect(message.content).toMatchObject([{ type: "text", text: "Hello from the mock upstream." }]);
    expect(message.stop_reason).toBe("end_turn");
    expect(message.usage.output_tokens).toBe(6);
    expect(message.usage.input_tokens).toBeGreaterThan(0);
    const sent = mock.requests.slice(before);
    expect(sent.map((r) => r.path)).toEqual([mode === "native" ? "/v1/messages" : "/v1/chat/completions"]);
    expect(sent[0].body.model).toBe("mock-small");
    expect(sent[0].body.max_tokens).toBe(100);
  });

  test("a streamed call's upstream body: native as it came (no stream_options added), translated as chat asking for usage", async () => {
    const before = mock.requests.length;
    await client()
      .messages.stream({ model: mode, max_tokens: 100, messages: hello, metadata: { user_id: "u-1" } })
      .finalMessage();
    const sent = mock.requests[before].body;
    // The SDK's anthropic-version goes on to a native upstream, which needs it to read the body.
    const version = mock.requests[before].headers["anthropic-version"];
    if (mode === "native") expect(version).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    else expect(version).toBeUndefined();
    if (mode === "native") expect(sent).toEqual({ model: "mock-small", max_tokens: 100, messages: hello, metadata: { user_id: "u-1" }, stream: true });
    else expect(sent).toMatchObject({ model: "mock-small", messages: hello, user: "u-1", stream: true, stream_options: { include_usage: true } });
  });

  test("messages.stream with finalMessage(): the full event sequence", async () => {
    const stream = client().messages.stream({ model: mode, max_tokens: 100, messages: hello });
    const types: string[] = [];
    stream.on("streamEvent", (event) => types.push(event.type));
    const message = await stream.finalMessage();
    expect(message.content).toMatchObject([{ type: "text", text: "Hello from the mock upstream." }]);
    expect(message.stop_reason).toBe("end_turn");
    expect(message.usage.output_tokens).toBe(6);
    expect(types[0]).toBe("message_start");
    expect(types.at(-1)).toBe("message_stop");
    expect(types).toContain("content_block_delta");
    expect(types.at(-2)).toBe("message_delta");
  });

  test("a two-turn tool-use loop, streamed then whole", async () => {
    const first = await client()
      .messages.stream({ model: mode, max_tokens: 100, messages: [{ role: "user", content: "Weather in Paris?" }], tools: weather })
      .finalMessage();
    expect(first.stop_reason).toBe("tool_use");
    const call = first.content.find((block) => block.type === "tool_use")!;
    expect(call).toMatchObject({ type: "tool_use", name: "get_weather", input: MOCK_TOOL_INPUT });
    const second = await client().messages.create({
      model: mode,
      max_tokens: 100,
      tools: weather,
      messages: [
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: call.type === "tool_use" ? call.id : "", content: "Sunny, 21 C" }] },
      ],
    });
    expect(second.stop_reason).toBe("end_turn");
    expect(second.content[0]).toMatchObject({ type: "text", text: "Hello from the mock upstream." });
  });

  test("a stream that breaks after it began ends with an Anthropic error event", async () => {
    const stream = client().messages.stream({ model: `${mode}-breaks`, max_tokens: 100, messages: hello });
    const texts: string[] = [];
    stream.on("text", (text) => texts.push(text));
    const error = await failure(stream.finalMessage());
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect(error.message).toContain("api_error");
    expect(error.message).toContain("before the answer was complete");
    expect(texts.join("")).toBe("Hello from");
  });

  test("countTokens answers input_tokens, asked of the upstream only when it serves Messages, and charges nothing", async () => {
    const user = await createUserKey(gw, { name: `count-${mode}`, credits: "1" });
    const before = mock.requests.length;
    const counted = await client(user.key).messages.countTokens({ model: mode, messages: hello, system: "Be brief." });
    expect(counted.input_tokens).toBeGreaterThan(0);
    expect(mock.requests.slice(before).map((r) => r.path)).toEqual(mode === "native" ? ["/v1/messages/count_tokens"] : []);
    const rows = await usageRows(user.email, 1);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ endpoint: "messages", status: 200 });
    expect((await gw.cli(["credits", "balance", "--user", user.email])).stdout.trim()).toBe(`${user.email}: 1.000000 credits`);
  });

  test("errors in Anthropic's shape, each the SDK's class", async () => {
    const bad = await failure(client("sk-mg-not-a-real-key").messages.create({ model: mode, max_tokens: 10, messages: hello }));
    expect(bad).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(bad.error?.error.type).toBe("authentication_error");
    const missing = await failure(client().messages.create({ model: "no-such-model", max_tokens: 10, messages: hello }));
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
    expect(missing.error?.type).toBe("error");
    const invalid = await failure(client().messages.create({ model: mode, messages: hello } as never));
    expect(invalid).toBeInstanceOf(Anthropic.BadRequestError);
    expect(invalid.error?.error.type).toBe("invalid_request_error");
    const failed = await failure(client().messages.create({ model: `${mode}-broken`, max_tokens: 10, messages: hello }));
    expect(failed).toBeInstanceOf(Anthropic.InternalServerError);
    expect(failed.error?.error.type).toBe("api_error");
  });

  test("a key whose policy excludes the model is PermissionDeniedError; one over its rate limit RateLimitError with retry-after", async () => {
    const other = mode === "native" ? "translated" : "native";
    await createUserKey(gw, { email: `limited-${mode}@example.com`, credits: "1" });
    const narrow = await gw.cli(["key", "create", "--user", `limited-${mode}@example.com`, "--name", "narrow", "--models", other, "--per-minute", "1"]);
    const narrowKey = narrow.stdout.trim();
    const denied = await failure(client(narrowKey).messages.create({ model: mode, max_tokens: 10, messages: hello }));
    expect(denied).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(denied.error?.error.type).toBe("permission_error");
    await client(narrowKey)
      .messages.create({ model: other, max_tokens: 10, messages: hello })
      .catch(() => {});
    const limited = await failure(client(narrowKey).messages.create({ model: other, max_tokens: 10, messages: hello }));
    expect(limited).toBeInstanceOf(Anthropic.RateLimitError);
    expect(limited.error?.error.type).toBe("rate_limit_error");
    expect((limited as unknown as { headers: Headers }).headers.get("retry-after")).toMatch(/^\d+$/);
  });

  test("no credits: 402 billing_error, the upstream not called, nothing charged", async () => {
    const poor = await createUserKey(gw, { name: `poor-${mode}` });
    const calls = mock.requests.length;
    const error = await failure(client(poor.key).messages.create({ model: mode, max_tokens: 10, messages: hello }));
    expect(error.status).toBe(402);
    expect(error.error?.error.type).toBe("billing_error");
    expect(mock.requests.length).toBe(calls);
    // count_tokens reserves and charges nothing, so it needs no balance.
    expect((await client(poor.key).messages.countTokens({ model: mode, messages: hello })).input_tokens).toBeGreaterThan(0);
  });
});

describe("/v1/messages as Claude Code calls it", () => {
  test("x-api-key on ?beta=true with anthropic-beta and anthropic-version; a bad x-api-key is 401, never anonymous", async () => {
    const headers = {
      "content-type": "application/json",
      "anthropic-version": "2023-06-01",
      "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
    };
    const body = JSON.stringify({
      model: "translated",
      max_tokens: 32000,
      messages: [
        { role: "user", content: "hi" },
        { role: "system", content: [{ type: "text", text: "# Environment" }] },
      ],
      thinking: { type: "adaptive" },
    });
    const ok = await fetch(`${gw.url}/v1/messages?beta=true`, { method: "POST", headers: { ...headers, "x-api-key": key }, body });
    expect(await ok.clone().text()).toContain('"type":"message"');
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { type: string }).type).toBe("message");
    const bad = await fetch(`${gw.url}/v1/messages?beta=true`, { method: "POST", headers: { ...headers, "x-api-key": "sk-mg-wrong" }, body });
    expect(bad.status).toBe(401);
    expect(await bad.json()).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    // Judged before the body and the model, as a bad bearer token is.
    const unknown = await fetch(`${gw.url}/v1/messages`, {
      method: "POST",
      headers: { ...headers, "x-api-key": "sk-mg-wrong" },
      body: body.replace('"translated"', '"nope"'),
    });
    expect(unknown.status).toBe(401);
    const anonymous = await fetch(`${gw.url}/v1/messages`, { method: "POST", headers, body });
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { error: { type: string } }).error.type).toBe("authentication_error");
  });

  test("x-api-key is a key on every /v1 model route, chat included; a bad one is 401 there too", async () => {
    const body = JSON.stringify({ model: "translated", messages: [{ role: "user", content: "hi" }] });
    const ok = await fetch(`${gw.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": key }, body });
    expect(ok.status).toBe(200);
    const bad = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "sk-mg-wrong" },
      body,
    });
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
  });

  test("the OpenAPI document lists both paths, with x-api-key among their ways to authenticate", async () => {
    const doc = (await (await fetch(`${gw.url}/swagger/json`)).json()) as { paths: Record<string, { post?: { security: unknown[] } }> };
    for (const path of ["/v1/messages", "/v1/messages/count_tokens"]) expect(doc.paths[path]?.post?.security).toContainEqual({ anthropicKey: [] });
  });

  test("a server tool cannot be translated: a 400 naming it, nothing sent upstream", async () => {
    const calls = mock.requests.length;
    const error = await failure(
      client().messages.create({ model: "translated", max_tokens: 10, messages: hello, tools: [{ type: "web_search_20250305", name: "web_search" }] as never }),
    );
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect(error.message).toContain("web_search_20250305");
    expect(mock.requests.length).toBe(calls);
  });

  test.each(MODES)("a %s call, streamed, is debited from the usage the client was told and logged as endpoint messages", async (mode) => {
    const user = await createUserKey(gw, { name: "debit", credits: "10" });
    const message = await client(user.key).messages.stream({ model: mode, max_tokens: 50, messages: hello }).finalMessage();
    const cost = message.usage.input_tokens * 1000 + message.usage.output_tokens * 2000;
    const expected = String((10_000_000 - cost) / 1_000_000);
    let shown = "";
    for (let i = 0; i < 50 && !shown.includes(expected); i++) {
      shown = (await gw.cli(["credits", "balance", "--user", user.email])).stdout;
      await Bun.sleep(100);
    }
    expect(shown).toContain(expected);
    const rows = await usageRows(user.email, 1);
    expect(rows.map((row) => row.endpoint)).toEqual(["messages"]);
  });
});
