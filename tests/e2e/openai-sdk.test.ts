/**
 * The compiled binary over loopback, driven by the official `openai` SDK, in front of the mock
 * upstream: models.list and retrieve, a completion, a streamed completion, typed errors, client disconnects,
 * the CLI's config check, and graceful shutdown with a stream in flight.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { tmpdir } from "node:os";
import { createUserKey, startGateway, BINARY, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

let mock: MockUpstream;
let slow: MockUpstream;
let gw: RunningGateway;
let client: OpenAI;
let apiKey: string;

const config = (mockUrl: string, slowUrl: string) => `
[limits]
api_key = { per_minute = 10000 }

[[upstreams]]
name = "mock"
base_url = "${mockUrl}"

[[upstreams]]
name = "slow"
base_url = "${slowUrl}"

[[models]]
id = "chat-small"
targets = [{ upstream = "mock", model = "mock-small" }]
free = true

[[models]]
id = "slow-stream"
targets = [{ upstream = "slow", model = "mock-small" }]
free = true
`;

beforeAll(async () => {
  mock = startMockUpstream();
  slow = startMockUpstream({ words: Array.from({ length: 40 }, (_, i) => ` w${i}`), chunkDelayMs: 50 });
  gw = await startGateway(config(mock.url, slow.url));
  // A real key, made the way an operator makes one: with the binary's own CLI.
  apiKey = (await createUserKey(gw, { name: "sdk" })).key;
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey, maxRetries: 0 });
});

afterAll(async () => {
  await gw?.stop();
  mock?.stop();
  slow?.stop();
});

describe("openai SDK against the compiled binary", () => {
  test("models.list", async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual(expect.arrayContaining(["chat-small", "slow-stream"]));
  });

  test("models.retrieve, and NotFoundError for an unknown model", async () => {
    expect(await client.models.retrieve("chat-small")).toMatchObject({ id: "chat-small", object: "model" });
    const error = await client.models.retrieve("no-such-model").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
  });

  test("a non-streamed completion", async () => {
    const completion = await client.chat.completions.create({ model: "chat-small", messages: [{ role: "user", content: "hello" }] });
    expect(completion.choices[0].message.content).toBe("Hello from the mock upstream.");
    expect(completion.usage?.completion_tokens).toBe(6);
  });

  test("a streamed completion read with for await", async () => {
    const stream = await client.chat.completions.create({ model: "chat-small", messages: [{ role: "user", content: "hello" }], stream: true });
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      text += chunk.choices[0]?.delta?.content ?? "";
    }
    expect(text).toBe("Hello from the mock upstream.");
    expect(chunks).toBe(7);
  });

  test("the second turn of a tool-calling loop: the assistant's tool call sent back as the SDK returned it (content null), then the tool's result", async () => {
    const assistant = {
      role: "assistant" as const,
      content: null,
      tool_calls: [{ id: "call_1", type: "function" as const, function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
    };
    const completion = await client.chat.completions.create({
      model: "chat-small",
      messages: [{ role: "user", content: "Weather in Paris?" }, assistant, { role: "tool", tool_call_id: "call_1", content: '{"temp":20}' }],
    });
    expect(completion.choices[0].message.content).toBe("Hello from the mock upstream.");
  });

  test("an unknown model surfaces as the SDK's NotFoundError", async () => {
    const error = await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }).catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error.status).toBe(404);
    expect(error.code).toBe("model_not_found");
    expect(error.requestID).toMatch(/^req_/);
  });

  test("an invalid body surfaces as the SDK's BadRequestError", async () => {
    const error = await client.chat.completions.create({ model: "chat-small", messages: [{ role: "wizard" as "user", content: "x" }] }).catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.message).toContain("messages[0].role");
  });

  test("a client that disconnects mid-stream aborts the upstream request", async () => {
    const before = slow.cancelledStreams;
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model: "slow-stream", messages: [{ role: "user", content: "long" }], stream: true },
      { signal: controller.signal },
    );
    let seen = 0;
    try {
      for await (const _ of stream) {
        if (++seen === 2) controller.abort();
      }
    } catch {}
    for (let i = 0; i < 100 && slow.cancelledStreams === before; i++) await Bun.sleep(20);
    expect(slow.cancelledStreams).toBe(before + 1);
  });
});

describe("upstream failures", () => {
  test("an unreachable upstream is 502 upstream_error", async () => {
    const dead = await startGateway(`
[[upstreams]]
name = "gone"
base_url = "http://127.0.0.1:9/v1"
[[models]]
id = "gone"
targets = [{ upstream = "gone" }]
free = true
`);
    try {
      const sdk = new OpenAI({ baseURL: `${dead.url}/v1`, apiKey: (await createUserKey(dead)).key, maxRetries: 0 });
      const error = await sdk.chat.completions.create({ model: "gone", messages: [{ role: "user", content: "x" }] }).catch((e) => e);
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect(error.status).toBe(502);
      expect(error.code).toBe("upstream_error");
    } finally {
      await dead.stop();
    }
  });
});

describe("command line", () => {
  test("config check prints the resolved config with secrets redacted", async () => {
    const dir = (await import("node:fs")).mkdtempSync(`${tmpdir()}/modelgate-check-`);
    await Bun.write(`${dir}/modelgate.toml`, `[[upstreams]]\nname = "openai"\nbase_url = "https://api.example.com/v1"\napi_key = "env:UPSTREAM_KEY"\n`);
    const result = Bun.spawnSync([BINARY, "config", "check", "--config", `${dir}/modelgate.toml`], {
      env: { ...process.env, MODELGATE_CONFIG: "", UPSTREAM_KEY: "sk-should-not-print" },
    });
    const stdout = result.stdout.toString();
    expect(result.exitCode).toBe(0);
    expect(stdout).toContain('"base_url": "https://api.example.com/v1"');
    expect(stdout).toContain('"api_key": "<redacted>"');
    expect(stdout + result.stderr.toString()).not.toContain("sk-should-not-print");
  });

  test("a bad config stops start-up with the key path and no stack trace", async () => {
    const dir = (await import("node:fs")).mkdtempSync(`${tmpdir()}/modelgate-bad-`);
    await Bun.write(`${dir}/modelgate.toml`, `[[models]]\nid = "x"\ntargets = [{ upstream = "olama" }]\n`);
    const result = Bun.spawnSync([BINARY, "serve"], { cwd: dir, env: { ...process.env, MODELGATE_CONFIG: "" } });
    const stderr = result.stderr.toString();
    expect(result.exitCode).toBe(1);
    expect(stderr).toContain('models[0].targets[0].upstream: no upstream named "olama"');
    expect(stderr).not.toMatch(/\n\s+at /);
  });

  test("version", () => {
    const result = Bun.spawnSync([BINARY, "version"]);
    expect(result.stdout.toString()).toMatch(/^modelgate \d+\.\d+\.\d+ \(commit \S+, interface 2026-06-16/);
  });
});

describe("graceful shutdown", () => {
  test("SIGTERM lets an in-flight stream finish, then exits 0", async () => {
    const own = await startGateway(config(mock.url, slow.url));
    const sdk = new OpenAI({ baseURL: `${own.url}/v1`, apiKey: (await createUserKey(own)).key, maxRetries: 0 });
    const stream = await sdk.chat.completions.create({ model: "slow-stream", messages: [{ role: "user", content: "x" }], stream: true });
    let text = "";
    let signalled = false;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (!signalled) {
        signalled = true;
        own.proc.kill("SIGTERM");
      }
    }
    expect(text.split(" w").length - 1).toBe(40);
    expect(await own.proc.exited).toBe(0);
    const refused = await fetch(`${own.url}/api/health`).then(
      () => "answered",
      () => "refused",
    );
    expect(refused).toBe("refused");
  });
});
