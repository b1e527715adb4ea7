import { describe, expect, test } from "bun:test";
import { responsesToChat } from "../../src/translate/responses-request";

function translated(body: Record<string, unknown>, priorItems?: unknown[]): { chat: Record<string, any>; echo: Record<string, any> } {
  const out = responsesToChat({ model: "route-r", ...body }, { priorItems });
  if ("error" in out) throw new Error(out.error.message);
  return out;
}

function errorOf(body: unknown): { message: string; param: string | null } {
  const out = responsesToChat(body);
  if (!("error" in out)) throw new Error("expected a 400");
  expect(out.error.status).toBe(400);
  expect(out.error.code).toBe("invalid_request_error");
  return out.error;
}

describe("responsesToChat", () => {
  test("a string input with instructions; the echo holds the request's fields and OpenAI's defaults", () => {
    const { chat, echo } = translated({ input: "Hello", instructions: "Be brief.", max_output_tokens: 50, temperature: 0.5, metadata: { k: "v" } });
    expect(chat).toEqual({
      model: "route-r",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hello" },
      ],
      max_tokens: 50,
      temperature: 0.5,
    });
    expect(echo).toEqual({
      instructions: "Be brief.",
      max_output_tokens: 50,
      metadata: { k: "v" },
      parallel_tool_calls: true,
      previous_response_id: null,
      store: true,
      temperature: 0.5,
      text: { format: { type: "text" } },
      tool_choice: "auto",
      tools: [],
      top_p: null,
    });
  });

  test("message items with parts, developer as system, images by URL", () => {
    const input = [
      { role: "developer", content: "Rules." },
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "What is this?" },
          { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "low" },
        ],
      },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "A square.", annotations: [] }] },
    ];
    expect(translated({ input }).chat.messages).toEqual([
      { role: "system", content: "Rules." },
      {
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AAAA", detail: "low" } },
        ],
      },
      { role: "assistant", content: "A square." },
    ]);
  });

  test("a tool loop: reasoning, text and function_call items become one assistant message; outputs become tool messages", () => {
    const input = [
      { role: "user", content: "Weather in Paris and Rome?" },
      { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "Two calls." }] },
      { type: "function_call", id: "fc_1", call_id: "call_1", name: "weather", arguments: '{"city":"Paris"}' },
      { type: "function_call", id: "fc_2", call_id: "call_2", name: "weather", arguments: '{"city":"Rome"}' },
      { type: "function_call_output", call_id: "call_1", output: "18C" },
      { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "21C" }] },
    ];
    expect(translated({ input }).chat.messages).toEqual([
      { role: "user", content: "Weather in Paris and Rome?" },
      {
        role: "assistant",
        content: null,
        reasoning_content: "Two calls.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: "call_2", type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "18C" },
      { role: "tool", tool_call_id: "call_2", content: "21C" },
    ]);
  });

  test("prior items of a stored conversation come first; its instructions do not", () => {
    const prior = [
      { role: "user", content: "My name is Ann." },
      { type: "message", id: "msg_1", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Hi Ann.", annotations: [] }] },
    ];
    expect(translated({ input: "What is my name?", instructions: "New rules." }, prior).chat.messages).toEqual([
      { role: "system", content: "New rules." },
      { role: "user", content: "My name is Ann." },
      { role: "assistant", content: "Hi Ann." },
      { role: "user", content: "What is my name?" },
    ]);
  });

  test("function tools, tool_choice variants, text.format json_schema, reasoning effort", () => {
    const tools = [{ type: "function", name: "weather", description: "By city", parameters: { type: "object" }, strict: true }];
    const schema = { type: "object", properties: { a: { type: "string" } } };
    const { chat } = translated({
      input: "x",
      tools,
      tool_choice: "required",
      text: { format: { type: "json_schema", name: "out", schema, strict: true } },
      reasoning: { effort: "low" },
      parallel_tool_calls: false,
    });
    expect(chat.tools).toEqual([{ type: "function", function: { name: "weather", description: "By city", parameters: { type: "object" }, strict: true } }]);
    expect(chat.tool_choice).toBe("required");
    expect(chat.response_format).toEqual({ type: "json_schema", json_schema: { name: "out", schema, strict: true } });
    expect(chat.reasoning_effort).toBe("low");
    expect(chat.parallel_tool_calls).toBe(false);
    expect(translated({ input: "x", tool_choice: { type: "function", name: "weather" } }).chat.tool_choice).toEqual({
      type: "function",
      function: { name: "weather" },
    });
    expect(translated({ input: "x", tool_choice: "none" }).chat.tool_choice).toBe("none");
    expect(translated({ input: "x", text: { format: { type: "json_object" } } }).chat.response_format).toEqual({ type: "json_object" });
    expect(translated({ input: "x", text: { format: { type: "text" } } }).chat.response_format).toBeUndefined();
  });
});

describe("responsesToChat: malformed or untranslatable requests are 400s naming the problem", () => {
  test.each([
    ["not an object", "hi", "body"],
    ["no model", { input: "x" }, "model"],
    ["no input", { model: "m" }, "input"],
    ["input a number", { model: "m", input: 5 }, "input"],
    ["max_output_tokens 0", { model: "m", input: "x", max_output_tokens: 0 }, "max_output_tokens"],
    ["instructions an array", { model: "m", input: "x", instructions: ["a"] }, "instructions"],
    ["a bad role", { model: "m", input: [{ role: "tool", content: "x" }] }, "input[0].role"],
    ["a function_call without call_id", { model: "m", input: [{ type: "function_call", name: "f", arguments: "{}" }] }, "input[0].call_id"],
  ])("%s", (_name, body, param) => {
    expect(errorOf(body).param).toBe(param);
  });

  test.each([
    ["an unknown item type", [{ type: "item_reference", id: "msg_1" }], "input[0].type", /item type "item_reference"/],
    [
      "an input_file part",
      [{ role: "user", content: [{ type: "input_file", file_id: "file_1" }] }],
      "input[0].content[0].type",
      /content part type "input_file"/,
    ],
    ["an image by file_id", [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }], "input[0].content[0]", /file_id/],
    [
      "an image in a function output",
      [{ type: "function_call_output", call_id: "c", output: [{ type: "input_image", image_url: "https://x/i.png" }] }],
      "input[0].output[0]",
      /only text/,
    ],
  ])("%s is named", (_name, input, param, message) => {
    const err = errorOf({ model: "m", input });
    expect(err.param).toBe(param);
    expect(err.message).toMatch(message);
  });

  test("a hosted tool type is named", () => {
    const err = errorOf({ model: "m", input: "x", tools: [{ type: "file_search", vector_store_ids: ["vs_1"] }] });
    expect(err).toEqual({
      message: 'tools[0].type: tool type "file_search" cannot be translated for this model (function tools, namespaces of them, and web search, left out)',
      param: "tools[0].type",
      status: 400,
      code: "invalid_request_error",
    } as never);
    expect(errorOf({ model: "m", input: "x", tools: [{ type: "computer_use_preview" }] }).param).toBe("tools[0].type");
  });

  test("Codex's tools: a namespace's functions offered by name, web search left out unless required", () => {
    const fn = (name: string) => ({ type: "function", name, parameters: { type: "object" }, strict: false });
    const tools = [
      fn("exec_command"),
      { type: "namespace", name: "multi_agent_v1", tools: [fn("spawn_agent"), fn("wait")] },
      { type: "web_search", external_web_access: false },
    ];
    const { chat } = translated({ input: "x", tools, tool_choice: "auto" });
    expect((chat.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual(["exec_command", "spawn_agent", "wait"]);
    expect(errorOf({ model: "m", input: "x", tools: [{ type: "web_search" }], tool_choice: "required" }).param).toBe("tool_choice");
    expect(errorOf({ model: "m", input: "x", tools: [{ type: "namespace", name: "n", tools: [{ type: "web_search" }] }] }).param).toBe(
      "tools[0].tools[0].type",
    );
  });

  test("an untranslatable tool_choice or text format is named", () => {
    expect(errorOf({ model: "m", input: "x", tool_choice: { type: "file_search" } }).param).toBe("tool_choice");
    expect(errorOf({ model: "m", input: "x", text: { format: { type: "grammar" } } }).message).toMatch(/"grammar"/);
  });
});
