/**
 * The ChatCompletionRequest schema of the interface: model, messages (role in system, developer, user,
 * assistant, tool; content a string or an array), optional stream, temperature, max_tokens,
 * max_completion_tokens, n and n_predict (each also null, meaning not given), and stream_options
 * (an object or null).
 * One widening, OpenAI's own rule: an assistant message that carries `tool_calls` (or the older
 * `function_call`) may have `content` null or absent, since that is how OpenAI answers a tool
 * call and how the SDKs send it back (the openai SDK's runTools, the Vercel AI SDK): refusing it
 * would break every tool-calling loop at its second turn. Everywhere else content is required
 * (contentMissing).
 * Additional properties are allowed everywhere and passed to the upstream untouched.
 * Plain TypeBox, not Elysia's `t`: Elysia's Integer also accepts numeric strings (for query
 * strings), which would pass `"max_tokens": "5"` on to the upstream as a string.
 */
import { Type as t } from "@sinclair/typebox";

const Message = t.Object(
  {
    role: t.Union([t.Literal("system"), t.Literal("developer"), t.Literal("user"), t.Literal("assistant"), t.Literal("tool")]),
    content: t.Optional(
      t.Union([t.String(), t.Array(t.Unknown()), t.Null()], {
        description: "A string or an array; null or absent only on an assistant message with tool_calls",
      }),
    ),
  },
  { additionalProperties: true },
);

/** The index of the first message whose content is null or absent without being an assistant's tool call, or -1. */
export function contentMissing(messages: ReadonlyArray<{ role: string; content?: unknown } & Record<string, unknown>>): number {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.content != null) continue;
    const toolCall =
      m.role === "assistant" && ((Array.isArray(m.tool_calls) && m.tool_calls.length > 0) || (m.function_call !== null && typeof m.function_call === "object"));
    if (!toolCall) return i;
  }
  return -1;
}

export const ChatCompletionRequest = t.Object(
  {
    model: t.String({ minLength: 1, description: "Model route identifier (GET /v1/models)" }),
    messages: t.Array(Message, { minItems: 1 }),
    // null is "not given", as OpenAI and its SDKs' types have it (`temperature ?? null` is common).
    stream: t.Optional(t.Union([t.Boolean(), t.Null()])),
    temperature: t.Optional(t.Union([t.Number(), t.Null()])),
    max_tokens: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()])),
    // Checked because the credit reservation counts them: a string ("8") would be reserved as
    // absent, and servers that coerce it (vLLM) would answer beyond the reservation.
    max_completion_tokens: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()])),
    n: t.Optional(t.Union([t.Integer({ minimum: 1, maximum: 128 }), t.Null()])),
    // llama.cpp reads it before max_tokens. Its -1 (no limit) passes here; a model whose
    // completions are priced refuses it (./endpoint.ts: no reservation covers "no limit").
    n_predict: t.Optional(t.Union([t.Integer({ minimum: -1 }), t.Null()])),
    // Checked because the gateway sets include_usage in it: a string would be spread into {"0": ...}.
    stream_options: t.Optional(t.Union([t.Object({}, { additionalProperties: true }), t.Null()])),
  },
  { additionalProperties: true },
);
