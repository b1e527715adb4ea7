/**
 * An Anthropic Messages request (`POST /v1/messages`) checked and rewritten as a chat.completions
 * request, for an upstream that does not serve Messages itself.
 *
 *   messagesToChat(body, { maxTokens?: "required" | "optional" })
 *     -> { chat, stopSequences } | { error: { status: 400, type: "invalid_request_error", message } }
 *
 * `model` is kept for routing; `stopSequences` is what the answer translators need to report
 * `stop_sequence`. count_tokens validates with maxTokens "optional" (its body has none).
 *
 * Mapping: `system` (a string or text blocks) becomes the first system message, and a turn of
 * role `system` in `messages` (Claude Code sends its environment so) a system message in place;
 * text blocks become text parts; images (base64 or url) become `image_url` parts (base64 as a
 * data: URL); `tool_use` blocks become the assistant's `tool_calls`; each `tool_result` becomes a
 * `tool` message placed before the rest of its user turn (chat wants tool answers right after the
 * call); `thinking` blocks go back as the assistant's `reasoning_content`. `stop_sequences` ->
 * `stop`, `metadata.user_id` -> `user`, `top_k` passed on (vLLM, llama.cpp, Ollama read it),
 * tools -> function tools, `tool_choice` auto/any/tool/none -> auto/required/{function}/none and
 * `disable_parallel_tool_use` -> `parallel_tool_calls: false`.
 * Dropped on purpose, as they carry no meaning a chat upstream could use: `cache_control` (a
 * caching hint), `redacted_thinking` blocks (encrypted for Anthropic's own models), `thinking`
 * (the request's budget: whether a model reasons is the model's), `service_tier`.
 * Any other block type, a tool with a server-tool `type` (web_search_..., bash_...), or an image
 * source other than base64/url is refused with a 400 naming it, never dropped.
 */
import {
  UntranslatableError,
  isRecord,
  type ChatContentPart,
  type ChatMessage,
  type ChatRequest,
  type ChatTool,
  type ChatToolCall,
  type ChatToolChoice,
} from "./chat";

export interface MessagesRequestError {
  status: 400;
  type: "invalid_request_error";
  message: string;
}

export type MessagesTranslation = { chat: ChatRequest; stopSequences: string[] } | { error: MessagesRequestError };

export function messagesToChat(body: unknown, options: { maxTokens?: "required" | "optional" } = {}): MessagesTranslation {
  try {
    return translate(body, options.maxTokens ?? "required");
  } catch (err) {
    if (err instanceof UntranslatableError) return { error: { status: 400, type: "invalid_request_error", message: err.message } };
    throw err;
  }
}

function fail(message: string): never {
  throw new UntranslatableError(message);
}

function translate(body: unknown, maxTokens: "required" | "optional"): { chat: ChatRequest; stopSequences: string[] } {
  if (!isRecord(body)) fail("The request body must be a JSON object");
  if (typeof body.model !== "string" || body.model === "") fail("model: a non-empty string is required");
  const max = body.max_tokens;
  if (max === undefined ? maxTokens === "required" : !Number.isSafeInteger(max) || (max as number) < 1)
    fail("max_tokens: an integer of at least 1 is required");
  if (!Array.isArray(body.messages) || body.messages.length === 0) fail("messages: a non-empty array is required");

  const messages: ChatMessage[] = [];
  if (body.system !== undefined) messages.push({ role: "system", content: systemText(body.system) });
  body.messages.forEach((message, i) => appendMessage(messages, message, `messages.${i}`));

  const chat: ChatRequest = { model: body.model, messages };
  if (max !== undefined) chat.max_tokens = max;
  const stopSequences = optionalStrings(body.stop_sequences, "stop_sequences");
  if (stopSequences.length > 0) chat.stop = stopSequences;
  for (const key of ["temperature", "top_p", "top_k"] as const) {
    const value = body[key];
    if (value === undefined) continue;
    if (typeof value !== "number" || !Number.isFinite(value)) fail(`${key}: must be a number`);
    chat[key] = value;
  }
  if (body.stream !== undefined) {
    if (typeof body.stream !== "boolean") fail("stream: must be a boolean");
    chat.stream = body.stream;
  }
  if (body.metadata !== undefined) {
    if (!isRecord(body.metadata)) fail("metadata: must be an object");
    const user = body.metadata.user_id;
    if (user !== undefined && user !== null && typeof user !== "string") fail("metadata.user_id: must be a string");
    if (typeof user === "string") chat.user = user;
  }
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) fail("tools: must be an array");
    chat.tools = body.tools.map(toolDefinition);
  }
  if (body.tool_choice !== undefined) Object.assign(chat, toolChoice(body.tool_choice));
  return { chat, stopSequences };
}

function optionalStrings(value: unknown, path: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((s) => typeof s === "string")) fail(`${path}: must be an array of strings`);
  return value;
}

function systemText(system: unknown, path = "system"): string {
  if (typeof system === "string") return system;
  if (!Array.isArray(system)) fail(`${path}: must be a string or an array of text blocks`);
  return system.map((block, i) => textOf(block, `${path}.${i}`)).join("\n");
}

function textOf(block: unknown, path: string): string {
  if (!isRecord(block)) fail(`${path}: must be a content block object`);
  if (block.type !== "text") fail(`${path}: content block type ${JSON.stringify(block.type)} is not supported here (only "text")`);
  if (typeof block.text !== "string") fail(`${path}.text: must be a string`);
  return block.text;
}

function appendMessage(out: ChatMessage[], message: unknown, path: string): void {
  if (!isRecord(message)) fail(`${path}: must be an object`);
  const { role, content } = message;
  if (role === "system") {
    out.push({ role: "system", content: systemText(content, `${path}.content`) });
    return;
  }
  if (role !== "user" && role !== "assistant") fail(`${path}.role: must be "user", "assistant" or "system"`);
  if (typeof content === "string") {
    out.push({ role, content });
    return;
  }
  if (!Array.isArray(content)) fail(`${path}.content: must be a string or an array of content blocks`);
  if (role === "assistant") out.push(assistantMessage(content, path));
  else appendUserBlocks(out, content, path);
}

function assistantMessage(blocks: unknown[], path: string): ChatMessage {
  let text = "";
  let reasoning = "";
  const calls: ChatToolCall[] = [];
  blocks.forEach((block, i) => {
    const at = `${path}.content.${i}`;
    if (!isRecord(block)) fail(`${at}: must be a content block object`);
    switch (block.type) {
      case "text":
        text += textOf(block, at);
        return;
      case "thinking":
        if (typeof block.thinking !== "string") fail(`${at}.thinking: must be a string`);
        reasoning += block.thinking;
        return;
      case "redacted_thinking":
        return;
      case "tool_use":
        if (typeof block.id !== "string" || typeof block.name !== "string") fail(`${at}: tool_use needs string id and name`);
        if (!isRecord(block.input)) fail(`${at}.input: must be an object`);
        calls.push({ id: block.id, type: "function", function: { name: block.name, arguments: JSON.stringify(block.input) } });
        return;
      default:
        fail(`${at}: content block type ${JSON.stringify(block.type)} cannot be translated for this model`);
    }
  });
  const message: ChatMessage = { role: "assistant", content: text === "" && calls.length > 0 ? null : text };
  if (calls.length > 0) message.tool_calls = calls;
  if (reasoning !== "") message.reasoning_content = reasoning;
  return message;
}

function appendUserBlocks(out: ChatMessage[], blocks: unknown[], path: string): void {
  const parts: ChatContentPart[] = [];
  blocks.forEach((block, i) => {
    const at = `${path}.content.${i}`;
    if (!isRecord(block)) fail(`${at}: must be a content block object`);
    if (block.type === "tool_result") out.push(toolMessage(block, at, parts));
    else parts.push(userPart(block, at));
  });
  if (parts.length > 0) out.push({ role: "user", content: parts.length === 1 && parts[0].type === "text" ? parts[0].text : parts });
}

function userPart(block: Record<string, unknown>, path: string): ChatContentPart {
  if (block.type === "text") return { type: "text", text: textOf(block, path) };
  if (block.type === "image") return { type: "image_url", image_url: { url: imageUrl(block.source, `${path}.source`) } };
  fail(`${path}: content block type ${JSON.stringify(block.type)} cannot be translated for this model`);
}

function imageUrl(source: unknown, path: string): string {
  if (!isRecord(source)) fail(`${path}: must be an object`);
  if (source.type === "base64") {
    if (typeof source.media_type !== "string" || typeof source.data !== "string") fail(`${path}: base64 images need string media_type and data`);
    return `data:${source.media_type};base64,${source.data}`;
  }
  if (source.type === "url") {
    if (typeof source.url !== "string") fail(`${path}.url: must be a string`);
    return source.url;
  }
  fail(`${path}: image source type ${JSON.stringify(source.type)} cannot be translated for this model`);
}

/**
 * A tool_result as a `tool` message. Chat's tool messages hold text only, so images in a result
 * travel in the user message that follows (`images` collects them). An error result is marked in
 * its text, as chat has no flag for it.
 */
function toolMessage(block: Record<string, unknown>, path: string, images: ChatContentPart[]): ChatMessage {
  if (typeof block.tool_use_id !== "string") fail(`${path}.tool_use_id: must be a string`);
  let text = "";
  if (typeof block.content === "string") text = block.content;
  else if (Array.isArray(block.content)) {
    const texts: string[] = [];
    block.content.forEach((inner, i) => {
      const at = `${path}.content.${i}`;
      const part = isRecord(inner) ? userPart(inner, at) : fail(`${at}: must be a content block object`);
      if (part.type === "text") texts.push(part.text);
      else images.push(part);
    });
    text = texts.join("\n");
  } else if (block.content !== undefined) fail(`${path}.content: must be a string or an array of content blocks`);
  return { role: "tool", tool_call_id: block.tool_use_id, content: block.is_error === true ? `[tool error] ${text}` : text };
}

function toolDefinition(tool: unknown, i: number): ChatTool {
  const path = `tools.${i}`;
  if (!isRecord(tool)) fail(`${path}: must be an object`);
  if (tool.type !== undefined && tool.type !== null && tool.type !== "custom")
    fail(`${path}: tool type ${JSON.stringify(tool.type)} cannot be translated for this model (only custom tools with an input_schema)`);
  if (typeof tool.name !== "string" || tool.name === "") fail(`${path}.name: a non-empty string is required`);
  if (!isRecord(tool.input_schema)) fail(`${path}.input_schema: an object is required`);
  if (tool.description !== undefined && typeof tool.description !== "string") fail(`${path}.description: must be a string`);
  const fn: ChatTool["function"] = { name: tool.name, parameters: tool.input_schema };
  if (typeof tool.description === "string") fn.description = tool.description;
  return { type: "function", function: fn };
}

function toolChoice(choice: unknown): { tool_choice: ChatToolChoice; parallel_tool_calls?: false } {
  if (!isRecord(choice)) fail("tool_choice: must be an object");
  let mapped: ChatToolChoice;
  if (choice.type === "auto") mapped = "auto";
  else if (choice.type === "any") mapped = "required";
  else if (choice.type === "none") mapped = "none";
  else if (choice.type === "tool") {
    if (typeof choice.name !== "string" || choice.name === "") fail("tool_choice.name: a non-empty string is required");
    mapped = { type: "function", function: { name: choice.name } };
  } else fail(`tool_choice.type: ${JSON.stringify(choice.type)} is not one of auto, any, tool, none`);
  return choice.disable_parallel_tool_use === true ? { tool_choice: mapped, parallel_tool_calls: false } : { tool_choice: mapped };
}
