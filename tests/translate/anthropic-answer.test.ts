import { describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { chatToMessage } from "../../src/translate/anthropic-answer";
import { anthropicError } from "../../src/translate/anthropic-errors";
import { estimateInputTokens } from "../../src/translate/count-tokens";
import { ERROR_STATUS } from "../../src/errors";
import { LENGTH, REASONING, REFUSAL, STOP_SEQUENCE, TEXT, TOOLS, collect } from "./chunks";
import { anthropicClient } from "./support";

describe("chatToMessage", () => {
  test("text, end_turn, usage with cached prompt tokens moved to cache_read_input_tokens", () => {
    expect(chatToMessage(collect(TEXT), { model: "route-a" })).toEqual({
      id: "msg_abc123",
      type: "message",
      role: "assistant",
      model: "route-a",
      content: [{ type: "text", text: 'Hello, "world"\nünïcode ✓' }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 8, output_tokens: 5, cache_read_input_tokens: 4 },
    });
  });

  test("reasoning_content becomes a thinking block before the text; so does `reasoning`", () => {
    const message = chatToMessage(collect(REASONING), { model: "m" });
    expect(message.content).toEqual([
      { type: "thinking", thinking: "Let me think.", signature: "" },
      { type: "text", text: "42" },
    ]);
    const other = { choices: [{ message: { role: "assistant", content: "x", reasoning: "hmm" }, finish_reason: "stop" }] };
    expect(chatToMessage(other, { model: "m" }).content[0]).toEqual({ type: "thinking", thinking: "hmm", signature: "" });
  });

  test("tool calls become tool_use blocks with parsed input and stop_reason tool_use", () => {
    const message = chatToMessage(collect(TOOLS), { model: "m" });
    expect(message.content).toEqual([
      { type: "text", text: "Checking." },
      { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } },
      { type: "tool_use", id: "call_2", name: "get_time", input: { tz: "CET" } },
    ]);
    expect(message.stop_reason).toBe("tool_use");
  });

  test("an OpenAI-style refusal is text with stop_reason refusal", () => {
    const message = chatToMessage(collect(REFUSAL), { model: "m" });
    expect([message.content, message.stop_reason]).toEqual([[{ type: "text", text: "I can't help with that." }], "refusal"]);
  });

  test("a tool call whose arguments are not a JSON object gets input {}", () => {
    const answer = {
      choices: [{ message: { tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "[1" } }] }, finish_reason: "tool_calls" }],
    };
    expect(chatToMessage(answer, { model: "m" }).content).toEqual([{ type: "tool_use", id: "c", name: "f", input: {} }]);
  });

  test("stop_sequence when the upstream names a requested sequence; end_turn when it names another; max_tokens on length", () => {
    const stopped = chatToMessage(collect(STOP_SEQUENCE), { model: "m", stopSequences: ["END"] });
    expect([stopped.stop_reason, stopped.stop_sequence]).toEqual(["stop_sequence", "END"]);
    const other = chatToMessage(collect(STOP_SEQUENCE), { model: "m", stopSequences: ["##"] });
    expect([other.stop_reason, other.stop_sequence]).toEqual(["end_turn", null]);
    expect(chatToMessage(collect(LENGTH), { model: "m" }).stop_reason).toBe("max_tokens");
  });

  test("a broken answer (no choices, no usage, strings where objects belong) still gives a well-formed message", () => {
    expect(chatToMessage({ id: 5, choices: "x", usage: { prompt_tokens: -1, completion_tokens: "2" } }, { model: "m", id: "msg_x" })).toEqual({
      id: "msg_x",
      type: "message",
      role: "assistant",
      model: "m",
      content: [],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 },
    });
  });

  test("the official SDK reads the translated answer", async () => {
    const body = JSON.stringify(chatToMessage(collect(TOOLS), { model: "m" }));
    const message = await anthropicClient(body, { contentType: "application/json" }).messages.create({
      model: "m",
      max_tokens: 10,
      messages: [{ role: "user", content: "x" }],
    });
    expect(message.content.map((b) => b.type)).toEqual(["text", "tool_use", "tool_use"]);
  });
});

describe("anthropicError", () => {
  const expected: Record<number, [string, new (...args: any[]) => Error]> = {
    400: ["invalid_request_error", Anthropic.BadRequestError],
    401: ["authentication_error", Anthropic.AuthenticationError],
    402: ["billing_error", Anthropic.PaymentRequiredError],
    403: ["permission_error", Anthropic.PermissionDeniedError],
    404: ["not_found_error", Anthropic.NotFoundError],
    411: ["invalid_request_error", Anthropic.APIError],
    413: ["request_too_large", Anthropic.ContentTooLargeError],
    429: ["rate_limit_error", Anthropic.RateLimitError],
    500: ["api_error", Anthropic.InternalServerError],
    502: ["api_error", Anthropic.InternalServerError],
    503: ["overloaded_error", Anthropic.ServiceUnavailableError],
    504: ["timeout_error", Anthropic.GatewayTimeoutError],
  };

  test.each(Object.entries(ERROR_STATUS).filter(([code]) => code !== "client_closed_request"))("%s (%d) through the official SDK", async (code, status) => {
    const { status: sent, body } = anthropicError(status, `denied: ${code}`);
    expect(sent).toBe(status);
    const [type, errorClass] = expected[status];
    expect(body).toEqual({ type: "error", error: { type: type as never, message: `denied: ${code}` } });
    const client = anthropicClient(JSON.stringify(body), { status, contentType: "application/json" });
    const err = await client.messages.create({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(errorClass);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(status);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toEqual(body);
  });

  test("an upstream's 529 is overloaded_error; an unlisted 4xx is invalid_request_error", () => {
    expect(anthropicError(529, "busy").body.error.type).toBe("overloaded_error");
    expect(anthropicError(422, "bad").body.error.type).toBe("invalid_request_error");
  });
});

describe("estimateInputTokens", () => {
  test("characters / 4, plus 4 per message and 1,600 per image", () => {
    const body = {
      model: "m",
      system: "x".repeat(40),
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "y".repeat(80) },
            { type: "image", source: { type: "url", url: "https://x/i.png" } },
          ],
        },
      ],
    };
    expect(estimateInputTokens(body)).toEqual({ input_tokens: 30 + 2 * 4 + 1600 });
  });

  test("tools count by their definition's JSON", () => {
    const tool = { name: "t", description: "d", input_schema: { type: "object" } };
    const without = estimateInputTokens({ model: "m", messages: [{ role: "user", content: "hi" }] }) as { input_tokens: number };
    const withTool = estimateInputTokens({ model: "m", messages: [{ role: "user", content: "hi" }], tools: [tool] }) as { input_tokens: number };
    const definition = JSON.stringify({ name: "t", parameters: { type: "object" }, description: "d" }).length;
    expect(withTool.input_tokens - without.input_tokens).toBe(Math.ceil((2 + definition) / 4) - Math.ceil(2 / 4));
  });

  test("a malformed body is the same 400 /v1/messages gives", () => {
    expect(estimateInputTokens({ model: "m", messages: [{ role: "user", content: [{ type: "audio" }] }] })).toEqual({
      error: { status: 400, type: "invalid_request_error", message: 'messages.0.content.0: content block type "audio" cannot be translated for this model' },
    });
  });
});
