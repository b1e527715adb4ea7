/**
 * /v1/responses on the compiled binary over loopback with the official `openai` SDK, in both
 * modes: passed through to an upstream that serves Responses itself (`native = ["responses"]`),
 * and translated to chat completions for one that does not. Each mode: create (JSON and
 * streamed), a function-calling loop through function_call_output, previous_response_id,
 * retrieve, store:false, another user's id; then credits from the translated usage, bad input,
 * and a stream that breaks.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { createUserKey, startGateway, type RunningGateway, type UserKey } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

let chat: MockUpstream;
let responses: MockUpstream;
let gw: RunningGateway;
let alice: UserKey;
let bob: UserKey;
let client: OpenAI;
let other: OpenAI;

const config = (chatUrl: string, responsesUrl: string): string => `
[limits]
api_key = { per_minute = 10000 }

[routing]
retry_backoff_ms = 0

[[upstreams]]
name = "dead"
base_url = "http://127.0.0.1:1/v1"
native = ["responses"]

[[upstreams]]
name = "chat"
base_url = "${chatUrl}"

[[upstreams]]
name = "native"
base_url = "${responsesUrl}"
native = ["responses"]

[[models]]
id = "translated"
targets = [{ upstream = "chat", model = "mock-small" }]
free = true

[[models]]
id = "native"
targets = [{ upstream = "native", model = "mock-large" }]
free = true

[[models]]
id = "mixed"
targets = [{ upstream = "dead", model = "mock-large" }, { upstream = "chat", model = "mock-small" }]
free = true

[[models]]
id = "paid"
targets = [{ upstream = "chat", model = "mock-small" }]
price = { prompt = 1000, completion = 2000 }
`;

const TEXT = "Hello from the mock upstream.";
const TOOLS: OpenAI.Responses.Tool[] = [
  {
    type: "function",
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } } },
    strict: false,
  },
];

beforeAll(async () => {
  chat = startMockUpstream({ callTool: true, reasoning: "Think first." });
  responses = startMockUpstream({ reasoning: "Think first." });
  gw = await startGateway(config(chat.url, responses.url));
  alice = await createUserKey(gw, { name: "alice", credits: "10" });
  bob = await createUserKey(gw, { name: "bob" });
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: alice.key, maxRetries: 0 });
  other = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: bob.key, maxRetries: 0 });
});

afterAll(async () => {
  await gw?.stop();
  chat?.stop();
  responses?.stop();
});

async function failure(call: PromiseLike<unknown>): Promise<{ status?: number; message: string; param?: string | null }> {
  try {
    await call;
  } catch (err) {
    return err as { status?: number; message: string };
  }
  throw new Error("the call succeeded");
}

describe.each(["native", "translated"])("/v1/responses, %s", (model) => {
  const upstream = (): MockUpstream => (model === "native" ? responses : chat);

  test("responses.create answers with the text, a reasoning summary and the usage", async () => {
    const response = await client.responses.create({ model, input: "Say hello", instructions: "Be brief" });
    expect(response.object).toBe("response");
    expect(response.status).toBe("completed");
    expect(response.output_text).toBe(TEXT);
    expect(response.output[0]).toMatchObject({ type: "reasoning", summary: [{ type: "summary_text", text: "Think first." }] });
    expect(response.usage!.output_tokens).toBe(6);
    const sent = upstream().requests.at(-1)!;
    expect(sent.path).toBe(model === "native" ? "/v1/responses" : "/v1/chat/completions");
    expect(sent.body.model).toBe(model === "native" ? "mock-large" : "mock-small");
  });

  test("stream: true gives the full event sequence, ending with response.completed", async () => {
    const stream = await client.responses.create({ model, input: "Say hello", stream: true });
    const types: string[] = [];
    let text = "";
    let completed: OpenAI.Responses.Response | null = null;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.completed") completed = event.response;
    }
    expect(text).toBe(TEXT);
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    for (const type of [
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.done",
      "response.output_item.done",
    ])
      expect(types).toContain(type);
    expect(completed!.output_text ?? completed!.output.at(-1)).toBeTruthy();
    expect(completed!.usage!.output_tokens).toBe(6);
    // A completed stream is stored as the JSON answer is.
    expect((await client.responses.retrieve(completed!.id)).id).toBe(completed!.id);
  });

  test("a function-calling loop: function_call, then function_call_output by previous_response_id, then retrieve", async () => {
    const first = await client.responses.create({ model, input: "Weather in Paris?", tools: TOOLS });
    const call = first.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toMatchObject({ name: "get_weather", arguments: '{"city":"Paris"}' });
    const second = await client.responses.create({
      model,
      previous_response_id: first.id,
      tools: TOOLS,
      input: [{ type: "function_call_output", call_id: call.call_id, output: '{"sky":"clear"}' }],
    });
    expect(second.output_text).toBe(TEXT);
    // The upstream got the whole conversation: the first question, the call and its output.
    const sent = JSON.stringify(upstream().requests.at(-1)!.body);
    expect(sent).toContain("Weather in Paris?");
    expect(sent).toContain('{\\"sky\\":\\"clear\\"}');
    expect(upstream().requests.at(-1)!.body.previous_response_id).toBeUndefined();
    const retrieved = await client.responses.retrieve(second.id);
    expect(retrieved.output_text).toBe(TEXT);
    expect(retrieved.id).toBe(second.id);
  });

  test("the loop with the whole conversation as input and store: false", async () => {
    const first = await client.responses.create({ model, input: [{ role: "user", content: "Weather in Paris?" }], tools: TOOLS, store: false });
    const call = first.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    const second = await client.responses.create({
      model,
      store: false,
      tools: TOOLS,
      input: [{ role: "user", content: "Weather in Paris?" }, call, { type: "function_call_output", call_id: call.call_id, output: "clear" }],
    });
    expect(second.output_text).toBe(TEXT);
    expect((await failure(client.responses.retrieve(second.id))).status).toBe(404);
    const continued = await failure(client.responses.create({ model, previous_response_id: first.id, input: "and tomorrow?" }));
    expect(continued.status).toBe(404);
  });

  test("Codex's turns as it sends them: streamed, store false, developer items with ids, namespace and web_search tools, reasoning echoed", async () => {
    const fn = (name: string) => ({
      type: "function",
      name,
      description: name,
      parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] },
      strict: false,
    });
    const tools = [
      fn("get_weather"),
      { type: "namespace", name: "multi_agent_v1", tools: [fn("spawn_agent")] },
      { type: "web_search", external_web_access: false },
    ];
    const codex = (input: unknown[]) => ({
      model,
      stream: true,
      store: false,
      tool_choice: "auto",
      parallel_tool_calls: true,
      reasoning: { summary: "auto" },
      include: ["reasoning.encrypted_content"],
      prompt_cache_key: "0b7f0c3e-session",
      client_metadata: { "x-codex-turn-metadata": "{}" },
      tools,
      input,
    });
    const history: unknown[] = [
      { type: "message", id: "msg_1", role: "developer", content: [{ type: "input_text", text: "You are a coding agent." }] },
      { type: "message", id: "msg_2", role: "user", content: [{ type: "input_text", text: "Weather in Paris?" }] },
    ];
    const done = async (body: unknown): Promise<Array<Record<string, any>>> => {
      const response = await fetch(`${gw.url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${alice.key}`, "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(200);
      const events = (await response.text())
        .split("\n\n")
        .filter((e) => e.includes("data:"))
        .map((e) => JSON.parse(e.slice(e.indexOf("data:") + 5)));
      expect(events.at(-1)!.type).toBe("response.completed");
      return events.filter((e) => e.type === "response.output_item.done").map((e) => e.item);
    };
    const first = await done(codex(history));
    const call = first.find((item) => item.type === "function_call")!;
    expect(call).toMatchObject({ name: "get_weather", arguments: '{"city":"Paris"}' });
    const reasoning = first.find((item) => item.type === "reasoning")!;
    const second = await done(
      codex([
        ...history,
        { ...reasoning, encrypted_content: null },
        { ...call, status: "completed" },
        { type: "function_call_output", id: "fco_1", call_id: call.call_id, output: "Output:\nclear\n" },
      ]),
    );
    expect(second.find((item) => item.type === "message")!.content[0].text).toBe(TEXT);
    if (model === "translated") expect(chat.requests.at(-1)!.body.tools.map((t: any) => t.function.name)).toEqual(["get_weather", "spawn_agent"]);
    else expect(responses.requests.at(-1)!.body.tools).toEqual(tools);
  });

  test("another user's response is a 404, by retrieve and by previous_response_id", async () => {
    const mine = await client.responses.create({ model, input: "A secret" });
    const sentBefore = upstream().requests.length;
    const read = await failure(other.responses.retrieve(mine.id));
    expect(read.status).toBe(404);
    const continued = await failure(other.responses.create({ model, previous_response_id: mine.id, input: "What was it?" }));
    expect(continued.status).toBe(404);
    expect(continued.message).not.toContain("A secret");
    expect(upstream().requests.length).toBe(sentBefore);
    expect((await failure(client.responses.retrieve("resp_unknown"))).status).toBe(404);
  });
});

describe("/v1/responses: credits, refusals, broken streams", () => {
  test("a paid model is charged the translated usage", async () => {
    const before = await balanceMicro(alice.email);
    const response = await client.responses.create({ model: "paid", input: "Count the cost", max_output_tokens: 50 });
    expect(chat.requests.at(-1)!.body.max_tokens).toBe(50);
    const cost = response.usage!.input_tokens * 1000 + response.usage!.output_tokens * 2000;
    let after = before;
    for (let i = 0; i < 50 && after === before; i++) {
      await Bun.sleep(100);
      after = await balanceMicro(alice.email);
    }
    expect(before - after).toBe(cost);
    // The request log names the endpoint.
    let endpoints: string[] = [];
    for (let i = 0; i < 50 && !endpoints.includes("responses"); i++) {
      const exported = await gw.cli(["usage", "export", "--user", alice.email, "--format", "json"]);
      endpoints = (JSON.parse(exported.stdout) as Array<{ endpoint: string }>).map((row) => row.endpoint);
      if (!endpoints.includes("responses")) await Bun.sleep(100);
    }
    expect(endpoints).toContain("responses");
  });

  test("an unknown previous_response_id on a paid model is a 404 that sends and charges nothing", async () => {
    const sent = chat.requests.length;
    const before = await balanceMicro(alice.email);
    const refused = await failure(client.responses.create({ model: "paid", previous_response_id: "resp_nobody", input: "go on" }));
    expect(refused.status).toBe(404);
    expect(refused.param).toBe("previous_response_id");
    expect(chat.requests.length).toBe(sent);
    await Bun.sleep(300);
    expect(await balanceMicro(alice.email)).toBe(before);
  });

  test("text.format json_schema reaches a chat upstream as response_format", async () => {
    const schema = { type: "object", properties: { hello: { type: "string" } }, required: ["hello"], additionalProperties: false };
    await client.responses.create({ model: "translated", input: "x", text: { format: { type: "json_schema", name: "greeting", schema, strict: true } } });
    expect(chat.requests.at(-1)!.body.response_format).toEqual({ type: "json_schema", json_schema: { name: "greeting", schema, strict: true } });
  });

  test("a route fails over from a native target that is down to a translated one, before the first byte", async () => {
    const response = await client.responses.create({ model: "mixed", input: "hi" });
    expect(response.output_text).toBe(TEXT);
    expect(chat.requests.at(-1)!.path).toBe("/v1/chat/completions");
    const stream = await client.responses.create({ model: "mixed", input: "hi", stream: true });
    let text = "";
    for await (const event of stream) if (event.type === "response.output_text.delta") text += event.delta;
    expect(text).toBe(TEXT);
  });

  test("a hosted tool or an unknown item type is a 400 naming it, and nothing is sent or charged", async () => {
    const sent = chat.requests.length;
    const before = await balanceMicro(alice.email);
    const tool = await failure(client.responses.create({ model: "paid", input: "Search", tools: [{ type: "file_search", vector_store_ids: ["vs_1"] }] }));
    expect(tool.status).toBe(400);
    expect(tool.message).toContain("tools[0].type");
    expect(tool.message).toContain("file_search");
    const item = await failure(client.responses.create({ model: "translated", input: [{ type: "item_reference", id: "x" } as never] }));
    expect(item.status).toBe(400);
    expect(item.message).toContain("input[0].type");
    const field = await failure(client.responses.create({ model: "translated", input: "x", max_output_tokens: "many" as never }));
    expect(field.status).toBe(400);
    expect(field.param).toBe("max_output_tokens");
    expect(chat.requests.length).toBe(sent);
    expect(await balanceMicro(alice.email)).toBe(before);
  });

  test("a native route takes a hosted tool as it is", async () => {
    const response = await client.responses.create({ model: "native", input: "Search", tools: [{ type: "web_search" }] });
    expect(response.output_text).toBe(TEXT);
    expect(responses.requests.at(-1)!.body.tools).toEqual([{ type: "web_search" }]);
  });

  test("an anonymous caller is answered and keeps nothing; its previous_response_id is refused", async () => {
    const anonymous = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "none", maxRetries: 0, defaultHeaders: { Authorization: null } });
    const response = await anonymous.responses.create({ model: "translated", input: "hi" });
    expect((response as unknown as { store: boolean }).store).toBe(false);
    const continued = await failure(anonymous.responses.create({ model: "translated", input: "hi", previous_response_id: response.id }));
    expect(continued.status).toBe(400);
    expect(continued.message).toContain("anonymous");
  });

  for (const model of ["native", "translated"]) {
    test(`a stream that breaks ends with response.failed (${model})`, async () => {
      const upstream = model === "native" ? responses : chat;
      upstream.behaviour.breakAfterChunks = 2;
      upstream.behaviour.chunkDelayMs = 10;
      if (model === "translated") upstream.behaviour.callTool = upstream.behaviour.reasoning = undefined;
      try {
        const stream = await client.responses.create({ model, input: "hi", stream: true });
        const types: string[] = [];
        let failed: OpenAI.Responses.Response | null = null;
        for await (const event of stream) {
          types.push(event.type);
          if (event.type === "response.failed") failed = event.response;
        }
        expect(types.at(-1)).toBe("response.failed");
        expect(types).not.toContain("response.completed");
        expect(failed!.status).toBe("failed");
        expect(failed!.error!.message).toContain("before the answer was complete");
        expect(failed!.id).toStartWith("resp_");
      } finally {
        upstream.behaviour.breakAfterChunks = upstream.behaviour.chunkDelayMs = undefined;
        if (model === "translated") Object.assign(upstream.behaviour, { callTool: true, reasoning: "Think first." });
      }
    });
  }
});

async function balanceMicro(email: string): Promise<number> {
  const shown = (await gw.cli(["credits", "balance", "--user", email])).stdout;
  const amount = /: (\d+(?:\.\d+)?) credits/.exec(shown)?.[1];
  return Math.round(Number(amount) * 1_000_000);
}
