/**
 * An OpenAI Responses request (`POST /v1/responses`) checked and rewritten as a chat.completions
 * request, for an upstream that does not serve Responses itself.
 *
 *   responsesToChat(body, { priorItems? })
 *     -> { chat, echo } | { error: { status: 400, code: "invalid_request_error", message, param } }
 *
 * `priorItems` are the input and output items of a stored conversation (previous_response_id),
 * put before this request's `input`; the previous `instructions` are not carried over, as OpenAI
 * does. `echo` holds the request fields a Response object repeats (instructions, tools, ...), for
 * ./responses-answer.ts and ./responses-stream.ts.
 *
 * Mapping: `instructions` -> the first system message; `input` as a string -> one user message;
 * message items (role user, assistant, system; developer sent as system) with input_text,
 * output_text, refusal and input_image (URL or data URL) parts; consecutive `function_call`
 * items -> one assistant message's `tool_calls` (joined to the assistant message just before);
 * `function_call_output` -> a `tool` message (text only: chat tool messages hold text);
 * `reasoning` items -> `reasoning_content` of the assistant message that follows them.
 * Tools and tool_choice as ./responses-tools.ts says;
 * `max_output_tokens` -> `max_tokens`; `text.format` json_schema / json_object ->
 * `response_format`; `reasoning.effort` -> `reasoning_effort`; `user` / `safety_identifier` ->
 * `user`. Any other item, part or tool type (file_search, web_search, input_file, file_id
 * images, item_reference, ...) is a 400 naming it.
 */
import { UntranslatableError, failParam, isRecord, type ChatContentPart, type ChatMessage, type ChatRequest } from "./chat";
import { toolChoice, translateTools } from "./responses-tools";

interface ResponsesRequestError {
  status: 400;
  code: "invalid_request_error";
  message: string;
  param: string | null;
}

/** The request fields a Response object repeats, as the client gave them (null when absent). */
export interface ResponseEcho {
  instructions: string | null;
  max_output_tokens: number | null;
  metadata: Record<string, unknown> | null;
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  store: boolean;
  temperature: number | null;
  text: Record<string, unknown>;
  tool_choice: unknown;
  tools: unknown[];
  top_p: number | null;
}

export type ResponsesTranslation = { chat: ChatRequest; echo: ResponseEcho } | { error: ResponsesRequestError };

export function responsesToChat(body: unknown, options: { priorItems?: readonly unknown[] } = {}): ResponsesTranslation {
  try {
    return translate(body, options.priorItems ?? []);
  } catch (err) {
    if (err instanceof UntranslatableError) return { error: { status: 400, code: "invalid_request_error", message: err.message, param: err.param } };
    throw err;
  }
}

function optional<T>(body: Record<string, unknown>, key: string, check: (v: unknown) => boolean, what: string): T | null {
  const value = body[key];
  if (value === undefined || value === null) return null;
  if (!check(value)) failParam(key, `must be ${what}`);
  return value as T;
}

const isNumber = (v: unknown): boolean => typeof v === "number" && Number.isFinite(v);

function translate(body: unknown, priorItems: readonly unknown[]): { chat: ChatRequest; echo: ResponseEcho } {
  if (!isRecord(body)) failParam("body", "must be a JSON object");
  if (typeof body.model !== "string" || body.model === "") failParam("model", "a non-empty string is required");
  const instructions = optional<string>(body, "instructions", (v) => typeof v === "string", "a string");
  const maxOutput = optional<number>(body, "max_output_tokens", (v) => Number.isSafeInteger(v) && (v as number) >= 1, "an integer of at least 1");
  const temperature = optional<number>(body, "temperature", isNumber, "a number");
  const topP = optional<number>(body, "top_p", isNumber, "a number");
  const parallel = optional<boolean>(body, "parallel_tool_calls", (v) => typeof v === "boolean", "a boolean");
  const stream = optional<boolean>(body, "stream", (v) => typeof v === "boolean", "a boolean");
  const store = optional<boolean>(body, "store", (v) => typeof v === "boolean", "a boolean");
  const metadata = optional<Record<string, unknown>>(body, "metadata", isRecord, "an object");
  const previous = optional<string>(body, "previous_response_id", (v) => typeof v === "string", "a string");
  const user =
    optional<string>(body, "user", (v) => typeof v === "string", "a string") ??
    optional<string>(body, "safety_identifier", (v) => typeof v === "string", "a string");
  const text = optional<Record<string, unknown>>(body, "text", isRecord, "an object");
  const tools = optional<unknown[]>(body, "tools", Array.isArray, "an array") ?? [];
  if (body.input === undefined && priorItems.length === 0) failParam("input", "is required");

  const messages: ChatMessage[] = [];
  if (instructions !== null) messages.push({ role: "system", content: instructions });
  const items = new InputItems(messages);
  priorItems.forEach((item, i) => items.add(item, `prior_items[${i}]`));
  if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
  else if (Array.isArray(body.input)) body.input.forEach((item, i) => items.add(item, `input[${i}]`));
  else if (body.input !== undefined) failParam("input", "must be a string or an array of items");

  const chat: ChatRequest = { model: body.model, messages };
  if (maxOutput !== null) chat.max_tokens = maxOutput;
  if (temperature !== null) chat.temperature = temperature;
  if (topP !== null) chat.top_p = topP;
  if (parallel !== null) chat.parallel_tool_calls = parallel;
  if (stream !== null) chat.stream = stream;
  if (user !== null) chat.user = user;
  const chatTools = translateTools(tools, body.tool_choice);
  if (chatTools.length > 0) chat.tools = chatTools;
  if (body.tool_choice !== undefined && body.tool_choice !== null) chat.tool_choice = toolChoice(body.tool_choice);
  const format = text ? responseFormat(text.format) : null;
  if (format) chat.response_format = format;
  if (body.reasoning !== undefined && body.reasoning !== null) {
    if (!isRecord(body.reasoning)) failParam("reasoning", "must be an object");
    if (typeof body.reasoning.effort === "string") chat.reasoning_effort = body.reasoning.effort;
  }
  const echo: ResponseEcho = {
    instructions,
    max_output_tokens: maxOutput,
    metadata,
    parallel_tool_calls: parallel ?? true,
    previous_response_id: previous,
    store: store ?? true,
    temperature,
    text: text ?? { format: { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools,
    top_p: topP,
  };
  return { chat, echo };
}

/** Input items appended to chat messages; it holds the reasoning waiting for its assistant message. */
class InputItems {
  private reasoning = "";
  constructor(private readonly messages: ChatMessage[]) {}

  add(item: unknown, path: string): void {
    if (!isRecord(item)) failParam(path, "must be an object");
    const type = item.type ?? "message";
    if (type === "message") this.message(item, path);
    else if (type === "function_call") this.functionCall(item, path);
    else if (type === "function_call_output") this.functionOutput(item, path);
    else if (type === "reasoning") this.reasoning += reasoningText(item, path);
    else failParam(`${path}.type`, `item type ${JSON.stringify(type)} cannot be translated for this model`);
  }

  private assistant(message: ChatMessage): ChatMessage {
    if (this.reasoning !== "") message.reasoning_content = this.reasoning;
    this.reasoning = "";
    this.messages.push(message);
    return message;
  }

  private message(item: Record<string, unknown>, path: string): void {
    const role = item.role === "developer" ? "system" : item.role;
    if (role !== "user" && role !== "assistant" && role !== "system") failParam(`${path}.role`, 'must be "user", "assistant", "system" or "developer"');
    const content = messageContent(item.content, `${path}.content`);
    if (role !== "assistant") {
      this.messages.push({ role, content });
      return;
    }
    this.assistant({ role, content: textOnly(content, `${path}.content`) });
  }

  private functionCall(item: Record<string, unknown>, path: string): void {
    for (const key of ["call_id", "name", "arguments"]) if (typeof item[key] !== "string") failParam(`${path}.${key}`, "must be a string");
    const call = { id: item.call_id as string, type: "function" as const, function: { name: item.name as string, arguments: item.arguments as string } };
    const last = this.messages.at(-1);
    if (last?.role === "assistant" && this.reasoning === "") (last.tool_calls ??= []).push(call);
    else this.assistant({ role: "assistant", content: null, tool_calls: [call] });
  }

  private functionOutput(item: Record<string, unknown>, path: string): void {
    if (typeof item.call_id !== "string") failParam(`${path}.call_id`, "must be a string");
    const text = textOnly(messageContent(item.output, `${path}.output`), `${path}.output`);
    this.messages.push({ role: "tool", tool_call_id: item.call_id, content: text });
  }
}

/** A reasoning item's text: its raw reasoning content when it has some, else its summary. */
function reasoningText(item: Record<string, unknown>, path: string): string {
  const key = Array.isArray(item.content) && item.content.length > 0 ? "content" : "summary";
  const parts = Array.isArray(item[key]) ? (item[key] as unknown[]) : [];
  return parts.map((p, i) => (isRecord(p) && typeof p.text === "string" ? p.text : failParam(`${path}.${key}[${i}].text`, "must be a string"))).join("\n");
}

/** The text of content that may hold text only (an assistant's, a function's output). */
function textOnly(content: string | ChatContentPart[], path: string): string {
  if (typeof content === "string") return content;
  return content.map((p, i) => (p.type === "text" ? p.text : failParam(`${path}[${i}]`, "only text can be translated here"))).join("");
}

function messageContent(content: unknown, path: string): string | ChatContentPart[] {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) failParam(path, "must be a string or an array of content parts");
  return content.map((part, i): ChatContentPart => {
    const at = `${path}[${i}]`;
    if (!isRecord(part)) failParam(at, "must be an object");
    if (part.type === "input_text" || part.type === "output_text") {
      if (typeof part.text !== "string") failParam(`${at}.text`, "must be a string");
      return { type: "text", text: part.text };
    }
    if (part.type === "refusal" && typeof part.refusal === "string") return { type: "text", text: part.refusal };
    if (part.type === "input_image" && typeof part.image_url === "string") {
      const image: { url: string; detail?: string } = { url: part.image_url };
      if (typeof part.detail === "string") image.detail = part.detail;
      return { type: "image_url", image_url: image };
    }
    if (part.type === "input_image") failParam(at, "only images given by image_url can be translated for this model (not file_id)");
    failParam(`${at}.type`, `content part type ${JSON.stringify(part.type)} cannot be translated for this model`);
  });
}

function responseFormat(format: unknown): Record<string, unknown> | null {
  if (format === undefined || format === null) return null;
  if (!isRecord(format)) failParam("text.format", "must be an object");
  if (format.type === "text") return null;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type !== "json_schema") failParam("text.format.type", `${JSON.stringify(format.type)} cannot be translated (text, json_schema or json_object)`);
  if (typeof format.name !== "string" || !isRecord(format.schema)) failParam("text.format", "json_schema needs a string name and an object schema");
  const schema: Record<string, unknown> = { name: format.name, schema: format.schema };
  if (typeof format.strict === "boolean") schema.strict = format.strict;
  if (typeof format.description === "string") schema.description = format.description;
  return { type: "json_schema", json_schema: schema };
}
