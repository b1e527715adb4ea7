import { describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { chatToResponse } from "../../src/translate/responses-answer";
import { responsesError } from "../../src/translate/responses-errors";
import { responsesToChat, type ResponseEcho } from "../../src/translate/responses-request";
import { createResponsesStream } from "../../src/translate/responses-stream";
import { INTERLEAVED, LENGTH, REASONING, REFUSAL, TEXT, TOOLS, collect } from "./chunks";
import { eventNames, openaiClient } from "./support";

const translation = responsesToChat({ model: "route-r", input: "x", metadata: { k: "v" } });
if ("error" in translation) throw new Error(translation.error.message);
const echo: ResponseEcho = translation.echo;
const meta = { model: "route-r", id: "resp_abc123", echo, createdAt: 1700000000 };

function translate(chunks: Record<string, unknown>[]): string {
  const stream = createResponsesStream(meta);
  return stream.start() + chunks.map((c) => stream.chunk(c)).join("") + stream.end();
}

/** The Response the openai SDK's ResponseStream accumulates, without the SDK's own additions (`output_text`, `output_parsed`, `parsed`, `parsed_arguments`). */
async function finalResponse(sse: string): Promise<Record<string, unknown>> {
  const response = await openaiClient(sse).responses.stream({ model: "route-r", input: "x" }).finalResponse();
  return JSON.parse(
    JSON.stringify(response, (key, value) => (["output_text", "output_parsed", "parsed", "parsed_arguments"].includes(key) ? undefined : value)),
  );
}

describe("chatToResponse", () => {
  test("text: a completed message item, usage, the request's fields echoed", () => {
    expect(chatToResponse(collect(TEXT), meta)).toEqual({
      id: "resp_abc123",
      object: "response",
      created_at: 1700000000,
      status: "completed",
      error: null,
      incomplete_details: null,
      model: "route-r",
      output: [
        {
          type: "message",
          id: "msg_abc123",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: 'Hello, "world"\nünïcode ✓', annotations: [], logprobs: [] }],
        },
      ],
      usage: {
        input_tokens: 12,
        input_tokens_details: { cached_tokens: 4 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 17,
      },
      ...echo,
    });
  });

  test("reasoning becomes a reasoning item with a summary; tool calls function_call items", () => {
    expect(chatToResponse(collect(REASONING), meta).output[0]).toEqual({
      type: "reasoning",
      id: "rs_abc123",
      summary: [{ type: "summary_text", text: "Let me think." }],
    });
    expect(chatToResponse(collect(TOOLS), meta).output.slice(1)).toEqual([
      { type: "function_call", id: "fc_abc123_0", call_id: "call_1", name: "get_weather", arguments: '{"city": "Paris"}', status: "completed" },
      { type: "function_call", id: "fc_abc123_1", call_id: "call_2", name: "get_time", arguments: '{"tz": "CET"}', status: "completed" },
    ]);
  });

  test("length gives an incomplete response naming max_output_tokens", () => {
    const response = chatToResponse(collect(LENGTH), meta);
    expect([response.status, response.incomplete_details, response.output[0].type === "message" && response.output[0].status]).toEqual([
      "incomplete",
      { reason: "max_output_tokens" },
      "incomplete",
    ]);
  });

  test("the official SDK reads it, output_text included", async () => {
    const client = openaiClient(JSON.stringify(chatToResponse(collect(TEXT), meta)), { contentType: "application/json" });
    expect((await client.responses.create({ model: "route-r", input: "x" })).output_text).toBe('Hello, "world"\nünïcode ✓');
  });
});

describe("createResponsesStream through the openai SDK's ResponseStream", () => {
  test.each([
    ["text", TEXT],
    ["reasoning then text", REASONING],
    ["text then tool calls with split arguments", TOOLS],
    ["length", LENGTH],
    ["a refusal", REFUSAL],
  ] as const)("%s: the final response equals the non-streamed translation", async (_name, chunks) => {
    const expected = JSON.parse(JSON.stringify(chatToResponse(collect([...chunks]), meta)));
    expect(await finalResponse(translate([...chunks]))).toEqual(expected);
  });

  test("a refusal is a message item of its own, as in the non-streamed translation", async () => {
    expect(chatToResponse(collect(REFUSAL), meta).output).toEqual([
      { type: "message", id: "msg_abc123", status: "completed", role: "assistant", content: [{ type: "refusal", refusal: "I can't help with that." }] },
    ]);
    expect(eventNames(translate(REFUSAL)).filter((n) => n.startsWith("response.refusal"))).toEqual([
      "response.refusal.delta",
      "response.refusal.delta",
      "response.refusal.done",
    ]);
  });

  test("reasoning after text opens new items with their own ids, which the SDK accepts", async () => {
    const response = await finalResponse(translate(INTERLEAVED));
    expect((response.output as { id: string }[]).map((item) => item.id)).toEqual(["rs_abc123", "msg_abc123", "rs_abc123_1", "msg_abc123_1"]);
  });

  test("the event sequence of a text answer, with sequence numbers 0, 1, 2, ...", () => {
    const sse = translate(TEXT);
    expect(eventNames(sse)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const numbers = [...sse.matchAll(/"sequence_number":(\d+)/g)].map((m) => Number(m[1]));
    expect(numbers).toEqual(numbers.map((_, i) => i));
  });

  test("tool calls: an item per call, argument deltas as sent, .done with the whole arguments", () => {
    const sse = translate(TOOLS);
    const events = sse
      .split("\n\n")
      .filter(Boolean)
      .map((e) => JSON.parse(e.slice(e.indexOf("data: ") + 6)));
    expect(events.filter((e) => e.type === "response.function_call_arguments.delta").map((e) => [e.item_id, e.output_index, e.delta])).toEqual([
      ["fc_abc123_0", 1, '{"city":'],
      ["fc_abc123_0", 1, ' "Paris"}'],
      ["fc_abc123_1", 2, '{"tz"'],
      ["fc_abc123_1", 2, ': "CET"}'],
    ]);
    expect(events.filter((e) => e.type === "response.function_call_arguments.done").map((e) => e.arguments)).toEqual(['{"city": "Paris"}', '{"tz": "CET"}']);
    expect(eventNames(sse).filter((n) => n.startsWith("response.reasoning"))).toEqual([]);
  });

  test("reasoning streams as summary events before the message", () => {
    expect(eventNames(translate(REASONING)).slice(2, 8)).toEqual([
      "response.output_item.added",
      "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
    ]);
  });

  test("response() is the final object once ended, for store", () => {
    const stream = createResponsesStream(meta);
    TOOLS.forEach((c) => stream.chunk(c));
    expect(stream.response()).toBeNull();
    stream.end();
    expect(stream.response()).toEqual(chatToResponse(collect(TOOLS), meta));
  });

  test("a stream that breaks ends with response.failed, which the SDK reports as a failed response", async () => {
    const stream = createResponsesStream(meta);
    const sse = stream.chunk(TOOLS[0]) + stream.chunk(TOOLS[1]) + stream.fail("The upstream stopped answering");
    expect(stream.chunk(TOOLS[2]) + stream.end() + stream.fail("again")).toBe("");
    expect(eventNames(sse).at(-1)).toBe("response.failed");
    const failed = JSON.parse(sse.slice(sse.lastIndexOf("data: ") + 6));
    expect(failed.response).toMatchObject({ status: "failed", error: { code: "server_error", message: "The upstream stopped answering" } });
    expect(await finalResponse(sse)).toMatchObject({
      id: "resp_abc123",
      status: "failed",
      error: { code: "server_error", message: "The upstream stopped answering" },
    });
  });
});

describe("responsesError", () => {
  test.each([
    [402, "insufficient_credits", OpenAI.APIError, "insufficient_quota"],
    [429, "rate_limit_exceeded", OpenAI.RateLimitError, "rate_limit_error"],
    [404, "model_not_found", OpenAI.NotFoundError, "invalid_request_error"],
    [502, "upstream_error", OpenAI.InternalServerError, "api_error"],
    [422, "upstream_said_no", OpenAI.UnprocessableEntityError, "invalid_request_error"],
  ] as const)("%d %s through the openai SDK", async (status, code, errorClass, type) => {
    const { status: sent, body } = responsesError(status, code, "denied", null);
    expect(sent).toBe(status);
    expect(body).toEqual({ error: { message: "denied", type, param: null, code } });
    const err = await openaiClient(JSON.stringify(body), { status, contentType: "application/json" })
      .responses.create({ model: "m", input: "x" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(errorClass);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe(code);
  });
});
