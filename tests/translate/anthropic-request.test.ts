import { describe, expect, test } from "bun:test";
import { messagesToChat } from "../../src/translate/anthropic-request";

const base = { model: "claude-ish", max_tokens: 64 };

function chatOf(body: Record<string, unknown>): Record<string, any> {
  const out = messagesToChat({ ...base, ...body });
  if ("error" in out) throw new Error(out.error.message);
  return out.chat;
}

function errorOf(body: unknown): string {
  const out = messagesToChat(body);
  if (!("error" in out)) throw new Error("expected a 400");
  expect(out.error.status).toBe(400);
  expect(out.error.type).toBe("invalid_request_error");
  return out.error.message;
}

describe("messagesToChat: system, content and parameters", () => {
  test("a system string becomes the first system message; model and max_tokens are kept", () => {
    const chat = chatOf({ system: "Be terse.", messages: [{ role: "user", content: "hi" }] });
    expect(chat).toEqual({
      model: "claude-ish",
      max_tokens: 64,
      messages: [
        { role: "system", content: "Be terse." },
        { role: "user", content: "hi" },
      ],
    });
  });

  test("system blocks are joined into one system message; cache_control is ignored", () => {
    const system = [
      { type: "text", text: "Rule one." },
      { type: "text", text: "Rule two.", cache_control: { type: "ephemeral" } },
    ];
    expect(chatOf({ system, messages: [{ role: "user", content: "hi" }] }).messages[0]).toEqual({ role: "system", content: "Rule one.\nRule two." });
  });

  test("a system turn inside messages (as Claude Code sends its environment) is a system message in place, string or blocks", () => {
    const messages = [
      { role: "user", content: "hi" },
      { role: "system", content: [{ type: "text", text: "# Environment", cache_control: { type: "ephemeral" } }] },
      { role: "system", content: "Be brief." },
    ];
    expect(chatOf({ messages }).messages).toEqual([
      { role: "user", content: "hi" },
      { role: "system", content: "# Environment" },
      { role: "system", content: "Be brief." },
    ]);
  });

  test("images: base64 becomes a data URL, url stays a URL, beside the text parts", () => {
    const content = [
      { type: "text", text: "Compare" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } },
    ];
    expect(chatOf({ messages: [{ role: "user", content }] }).messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "Compare" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } },
        ],
      },
    ]);
  });

  test("stop_sequences, temperature, top_p, top_k, stream and metadata.user_id", () => {
    const out = messagesToChat({
      ...base,
      messages: [{ role: "user", content: "x" }],
      stop_sequences: ["END", "##"],
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      stream: true,
      metadata: { user_id: "u-1" },
    });
    if ("error" in out) throw new Error(out.error.message);
    expect(out.stopSequences).toEqual(["END", "##"]);
    expect(out.chat).toMatchObject({ stop: ["END", "##"], temperature: 0.2, top_p: 0.9, top_k: 40, stream: true, user: "u-1" });
  });

  test("a two-turn tool loop: tool_use becomes tool_calls, tool_result a tool message before the rest of the turn", () => {
    const chat = chatOf({
      tools: [{ name: "get_weather", description: "Weather by city", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
      messages: [
        { role: "user", content: "Weather in Paris?" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "Use the tool.", signature: "sig" },
            { type: "redacted_thinking", data: "opaque" },
            { type: "text", text: "Let me check." },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "18C" }] },
            { type: "text", text: "And tomorrow?" },
          ],
        },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_2", name: "get_weather", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_2", content: "no data", is_error: true }] },
      ],
    });
    expect(chat.tools).toEqual([
      {
        type: "function",
        function: { name: "get_weather", description: "Weather by city", parameters: { type: "object", properties: { city: { type: "string" } } } },
      },
    ]);
    expect(chat.messages).toEqual([
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "Let me check.",
        reasoning_content: "Use the tool.",
        tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
      },
      { role: "tool", tool_call_id: "toolu_1", content: "18C" },
      { role: "user", content: "And tomorrow?" },
      { role: "assistant", content: null, tool_calls: [{ id: "toolu_2", type: "function", function: { name: "get_weather", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "toolu_2", content: "[tool error] no data" },
    ]);
  });

  test("an image inside a tool_result travels in the user message after the tool message", () => {
    const content = [
      {
        type: "tool_result",
        tool_use_id: "t1",
        content: [
          { type: "text", text: "chart:" },
          { type: "image", source: { type: "url", url: "https://x/c.png" } },
        ],
      },
    ];
    expect(chatOf({ messages: [{ role: "user", content }] }).messages).toEqual([
      { role: "tool", tool_call_id: "t1", content: "chart:" },
      { role: "user", content: [{ type: "image_url", image_url: { url: "https://x/c.png" } }] },
    ]);
  });

  test.each([
    [{ type: "auto" }, { tool_choice: "auto" }],
    [{ type: "any" }, { tool_choice: "required" }],
    [{ type: "none" }, { tool_choice: "none" }],
    [{ type: "tool", name: "get_weather" }, { tool_choice: { type: "function", function: { name: "get_weather" } } }],
    [
      { type: "auto", disable_parallel_tool_use: true },
      { tool_choice: "auto", parallel_tool_calls: false },
    ],
  ])("tool_choice %j", (choice, expected) => {
    const chat = chatOf({ messages: [{ role: "user", content: "x" }], tool_choice: choice });
    expect({ tool_choice: chat.tool_choice, ...(chat.parallel_tool_calls === undefined ? {} : { parallel_tool_calls: chat.parallel_tool_calls }) }).toEqual(
      expected,
    );
  });
});

describe("messagesToChat: malformed or untranslatable requests are 400s naming the problem", () => {
  const user = [{ role: "user", content: "hi" }];
  test.each([
    ["not an object", [1, 2], /JSON object/],
    ["no model", { max_tokens: 5, messages: user }, /model/],
    ["no max_tokens", { model: "m", messages: user }, /max_tokens/],
    ["max_tokens 0", { model: "m", max_tokens: 0, messages: user }, /max_tokens/],
    ["max_tokens a string", { model: "m", max_tokens: "5", messages: user }, /max_tokens/],
    ["no messages", { ...base }, /messages/],
    ["empty messages", { ...base, messages: [] }, /messages/],
    ["a tool role in messages", { ...base, messages: [{ role: "tool", content: "x" }] }, /messages\.0\.role/],
    ["content a number", { ...base, messages: [{ role: "user", content: 5 }] }, /messages\.0\.content/],
    ["temperature a string", { ...base, messages: user, temperature: "hot" }, /temperature/],
    ["stop_sequences a string", { ...base, messages: user, stop_sequences: "END" }, /stop_sequences/],
    ["tool_choice unknown", { ...base, messages: user, tool_choice: { type: "some" } }, /tool_choice\.type: "some"/],
    ["tool without input_schema", { ...base, messages: user, tools: [{ name: "t" }] }, /tools\.0\.input_schema/],
  ])("%s", (_name, body, message) => {
    expect(errorOf(body)).toMatch(message);
  });

  test("an unknown content block type is named with its path", () => {
    const content = [
      { type: "text", text: "read" },
      { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBER" } },
    ];
    expect(errorOf({ ...base, messages: [{ role: "user", content }] })).toBe(
      'messages.0.content.1: content block type "document" cannot be translated for this model',
    );
  });

  test("an unknown block in an assistant turn or a system block is named", () => {
    expect(errorOf({ ...base, messages: [{ role: "assistant", content: [{ type: "server_tool_use", id: "s", name: "web_search", input: {} }] }] })).toMatch(
      /"server_tool_use"/,
    );
    expect(errorOf({ ...base, system: [{ type: "image" }], messages: [{ role: "user", content: "x" }] })).toMatch(/system\.0: content block type "image"/);
  });

  test("a server tool type is named", () => {
    const tools = [{ type: "web_search_20250305", name: "web_search" }];
    expect(errorOf({ ...base, messages: [{ role: "user", content: "x" }], tools })).toMatch(/tools\.0: tool type "web_search_20250305" cannot be translated/);
  });

  test("an image source other than base64 or url is named", () => {
    const content = [{ type: "image", source: { type: "file", file_id: "file_1" } }];
    expect(errorOf({ ...base, messages: [{ role: "user", content }] })).toMatch(/messages\.0\.content\.0\.source: image source type "file"/);
  });
});
