/**
 * The model endpoints beside chat, on the compiled binary over loopback, as users meet them: the
 * official `openai` SDK (embeddings, completions JSON and streamed, a real WAV transcribed, speech
 * streamed to a file) and the Vercel AI SDK's embed/embedMany, in front of the mock upstream
 * speaking each endpoint's wire format. Keys, credits, limits and failover are checked on
 * embeddings and completions as on chat.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI, { toFile } from "openai";
import { embed, embedMany } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

let mock: MockUpstream;
let down: MockUpstream;
let gw: RunningGateway;
let client: OpenAI;
let apiKey: string;

const config = (mockUrl: string, downUrl: string) => `
[limits]
api_key = { per_minute = 10000 }

[routing]
retry_backoff_ms = 0

[[upstreams]]
name = "mock"
base_url = "${mockUrl}"

[[upstreams]]
name = "down"
base_url = "${downUrl}"

[[models]]
id = "local"
targets = [{ upstream = "mock", model = "mock-small" }]
free = true

[[models]]
id = "paid"
targets = [{ upstream = "down", model = "mock-small" }, { upstream = "mock", model = "mock-large" }]
price = { prompt = 1000, completion = 2000, request = 0.5 }

[[models]]
id = "chat-only"
targets = [{ upstream = "mock" }]
free = true
endpoints = ["chat"]
`;

/** A real WAV file: a RIFF header and 16-bit mono PCM of a 440 Hz tone. */
function wavFile(seconds: number, rate = 16_000): Buffer {
  const samples = Math.round(seconds * rate);
  const wav = Buffer.alloc(44 + samples * 2);
  wav.write("RIFF", 0, "latin1");
  wav.writeUInt32LE(36 + samples * 2, 4);
  wav.write("WAVEfmt ", 8, "latin1");
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(1, 22); // mono
  wav.writeUInt32LE(rate, 24);
  wav.writeUInt32LE(rate * 2, 28);
  wav.writeUInt16LE(2, 32);
  wav.writeUInt16LE(16, 34);
  wav.write("data", 36, "latin1");
  wav.writeUInt32LE(samples * 2, 40);
  for (let i = 0; i < samples; i++) wav.writeInt16LE(Math.round(Math.sin((2 * Math.PI * 440 * i) / rate) * 8000), 44 + i * 2);
  return wav;
}

async function balance(email: string): Promise<string> {
  const result = await gw.cli(["credits", "balance", "--user", email]);
  return result.stdout.trim();
}

beforeAll(async () => {
  mock = startMockUpstream();
  down = startMockUpstream({ failWith: 503 });
  gw = await startGateway(config(mock.url, down.url));
  apiKey = (await createUserKey(gw, { name: "sdk", credits: "100" })).key;
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey, maxRetries: 0 });
});

afterAll(async () => {
  await gw?.stop();
  mock?.stop();
  down?.stop();
});

/** The error an SDK call fails with (the SDK's promise is a thenable that `expect().rejects` does not await). */
async function failure(call: PromiseLike<unknown>): Promise<{ status?: number; message: string }> {
  try {
    await call;
  } catch (err) {
    return err as { status?: number; message: string };
  }
  throw new Error("the call succeeded");
}

const lastTo = (path: string) => mock.requests.filter((r) => r.path === path).at(-1)!;

describe("openai SDK: embeddings and completions", () => {
  test("embeddings.create with a string, an array and dimensions; the body reaches the upstream untouched", async () => {
    const one = await client.embeddings.create({ model: "local", input: "hello world" });
    expect(one.data).toHaveLength(1);
    expect(one.data[0].embedding.length).toBe(8);
    // The SDK asks for base64 and decodes it; the gateway adds nothing of its own.
    const sent = lastTo("/v1/embeddings");
    expect(sent.body).toEqual({ model: "mock-small", input: "hello world", encoding_format: "base64" });
    const many = await client.embeddings.create({ model: "local", input: ["a", "b", "c"], dimensions: 4, encoding_format: "float" });
    expect(many.data.map((d) => d.embedding.length)).toEqual([4, 4, 4]);
    expect(many.usage.prompt_tokens).toBeGreaterThan(0);
    expect(lastTo("/v1/embeddings").body).toEqual({ model: "mock-small", input: ["a", "b", "c"], dimensions: 4, encoding_format: "float" });
  });

  test("an embeddings body without encoding_format gets none (vLLM refuses null)", async () => {
    const response = await fetch(`${gw.url}/v1/embeddings`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "local", input: "x" }),
    });
    expect(response.status).toBe(200);
    expect(lastTo("/v1/embeddings").text).toBe('{"model":"mock-small","input":"x"}');
  });

  test("completions.create as JSON, with suffix passed through for fill-in-the-middle", async () => {
    const completion = await client.completions.create({ model: "local", prompt: "def add(a, b):", suffix: "return c", max_tokens: 8 });
    expect(completion.choices[0].text).toBe("Hello from the mock upstream.[suffix:return c]");
    expect(completion.usage?.completion_tokens).toBe(6);
    expect(lastTo("/v1/completions").body.suffix).toBe("return c");
  });

  test("completions.create streamed: every chunk, and the usage chunk only when asked for", async () => {
    const stream = await client.completions.create({ model: "local", prompt: "Hi", stream: true });
    let text = "";
    let usageChunks = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? "";
      if (chunk.usage) usageChunks += 1;
    }
    expect(text).toBe("Hello from the mock upstream.");
    expect(usageChunks).toBe(0);
    expect(lastTo("/v1/completions").body.stream_options).toEqual({ include_usage: true });
    const withUsage = await client.completions.create({ model: "local", prompt: "Hi", stream: true, stream_options: { include_usage: true } });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of withUsage) usage = chunk.usage ?? usage;
    expect(usage?.completion_tokens).toBe(6);
  });
});

describe("openai SDK: audio", () => {
  test("audio.transcriptions.create with a real WAV file (file before model, as the SDK's examples write it)", async () => {
    const wav = wavFile(0.5);
    const result = await client.audio.transcriptions.create({ file: await toFile(wav, "tone.wav", { type: "audio/wav" }), model: "local" });
    expect(result.text).toBe(`heard ${wav.byteLength} bytes of RIFF`);
    const seen = lastTo("/v1/audio/transcriptions").body;
    expect(seen.fields.model).toBe("mock-small");
    expect(seen.fileName).toBe("tone.wav");
    const text = await client.audio.translations.create({ file: await toFile(wav, "tone.wav"), model: "local", response_format: "text" });
    expect(String(text).trim()).toBe(`translated ${wav.byteLength} bytes of RIFF`);
  });

  test("audio.speech.create streamed to a file", async () => {
    const response = await client.audio.speech.create({ model: "local", voice: "alloy", input: "Hello there" });
    expect(response.headers.get("content-type")).toBe("audio/mpeg");
    const file = join(gw.dir, "speech.mp3");
    await Bun.write(file, response);
    expect(statSync(file).size).toBe(48_000);
    expect(readFileSync(file)[0]).toBe(0x49);
  });
});

describe("Vercel AI SDK", () => {
  test("embed and embedMany", async () => {
    const provider = createOpenAICompatible({ name: "modelgate", baseURL: `${gw.url}/v1`, apiKey });
    const one = await embed({ model: provider.textEmbeddingModel("local"), value: "sunny day at the beach" });
    expect(one.embedding).toHaveLength(8);
    const many = await embedMany({ model: provider.textEmbeddingModel("local"), values: ["a", "b"] });
    expect(many.embeddings).toHaveLength(2);
    expect(many.usage.tokens).toBeGreaterThan(0);
  });
});

describe("keys, credits, limits and failover beyond chat", () => {
  test("a bad key is a 401 on every endpoint; anonymous callers cannot use a paid model", async () => {
    const bad = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "sk-mg-not-a-key", maxRetries: 0 });
    expect((await failure(bad.embeddings.create({ model: "local", input: "x" }))).status).toBe(401);
    expect((await failure(bad.completions.create({ model: "local", prompt: "x" }))).status).toBe(401);
    const anonymous = await fetch(`${gw.url}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "paid", input: "x" }),
    });
    expect(anonymous.status).toBe(401);
  });

  test("a paid model fails over from an upstream answering 503 and charges the reported usage, per call for audio", async () => {
    const user = await createUserKey(gw, { name: "paid", credits: "1" });
    const paid = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: user.key, maxRetries: 0 });
    const before = down.requests.length;
    const embedded = await paid.embeddings.create({ model: "paid", input: "four tokens of text", encoding_format: "float" });
    expect(down.requests.length).toBe(before + 1);
    expect(lastTo("/v1/embeddings").body.model).toBe("mock-large");
    // prompt tokens x 1000 credits per 1M tokens
    const embeddingCost = embedded.usage.prompt_tokens * 1000;
    const completion = await paid.completions.create({ model: "paid", prompt: "Hi", max_tokens: 10 });
    const completionCost = completion.usage!.prompt_tokens * 1000 + completion.usage!.completion_tokens * 2000;
    await paid.audio.speech.create({ model: "paid", voice: "alloy", input: "x" }).then((r) => r.arrayBuffer());
    const expected = 1_000_000 - embeddingCost - completionCost - 500_000;
    // Debits are written behind: the balance settles shortly after the answers.
    let shown = "";
    for (let i = 0; i < 50 && !shown.includes(String(expected / 1_000_000)); i++) {
      shown = await balance(user.email);
      await Bun.sleep(100);
    }
    expect(shown).toContain(String(expected / 1_000_000));
    // The request log (and so the usage export) names each call's endpoint.
    let endpoints: string[] = [];
    for (let i = 0; i < 50 && endpoints.length < 3; i++) {
      const exported = await gw.cli(["usage", "export", "--user", user.email, "--format", "json"]);
      endpoints = (JSON.parse(exported.stdout) as Array<{ endpoint: string }>).map((row) => row.endpoint).sort();
      if (endpoints.length < 3) await Bun.sleep(100);
    }
    expect(endpoints).toEqual(["completions", "embeddings", "speech"]);
  });

  test("a balance below price.request is refused with a 402 before any upstream is called, and charged nothing", async () => {
    const user = await createUserKey(gw, { name: "poor", credits: "0.4" });
    const poor = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: user.key, maxRetries: 0 });
    const calls = mock.requests.length + down.requests.length;
    const error = await failure(poor.audio.speech.create({ model: "paid", voice: "alloy", input: "x" }));
    expect(error.status).toBe(402);
    expect(error.message).toContain("needs at least 0.5");
    expect(mock.requests.length + down.requests.length).toBe(calls);
    expect(await balance(user.email)).toContain("0.4");
  });

  test("a key's per-minute limit counts embeddings and completions", async () => {
    const user = await createUserKey(gw, { name: "unlimited" });
    const limited = await gw.cli(["key", "create", "--user", user.email, "--name", "limited", "--per-minute", "2"]);
    expect(limited.code).toBe(0);
    const sdk = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: limited.stdout.trim(), maxRetries: 0 });
    await sdk.embeddings.create({ model: "local", input: "x" });
    await sdk.completions.create({ model: "local", prompt: "x" });
    expect((await failure(sdk.embeddings.create({ model: "local", input: "x" }))).status).toBe(429);
  });

  test("a model narrowed to chat refuses embeddings with a 400 naming model and endpoint; /v1/models shows its endpoints", async () => {
    const error = await client.embeddings.create({ model: "chat-only", input: "x" }).catch((e) => e);
    expect(error.status).toBe(400);
    expect(error.message).toContain('"chat-only" does not serve /v1/embeddings');
    const chatOnly = await client.models.retrieve("chat-only");
    expect((chatOnly as unknown as { endpoints: string[] }).endpoints).toEqual(["chat"]);
  });
});
