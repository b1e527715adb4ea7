/**
 * The ChatCompletionRequest schema of the interface: model, messages (role in system, user,
 * assistant, tool; content a string or an array), optional stream, temperature, max_tokens,
 * and stream_options (an object or null).
 * Additional properties are allowed everywhere and passed to the upstream untouched.
 * Plain TypeBox, not Elysia's `t`: Elysia's Integer also accepts numeric strings (for query
 * strings), which would pass `"max_tokens": "5"` on to the upstream as a string.
 */
import { Type as t } from "@sinclair/typebox";

const Message = t.Object(
  {
    role: t.Union([t.Literal("system"), t.Literal("user"), t.Literal("assistant"), t.Literal("tool")]),
    content: t.Union([t.String(), t.Array(t.Unknown())]),
  },
  { additionalProperties: true },
);

export const ChatCompletionRequest = t.Object(
  {
    model: t.String({ minLength: 1, description: "Model route identifier (GET /v1/models)" }),
    messages: t.Array(Message, { minItems: 1 }),
    stream: t.Optional(t.Boolean()),
    temperature: t.Optional(t.Number()),
    max_tokens: t.Optional(t.Integer({ minimum: 1 })),
    // Checked because the gateway sets include_usage in it: a string would be spread into {"0": ...}.
    stream_options: t.Optional(t.Union([t.Object({}, { additionalProperties: true }), t.Null()])),
  },
  { additionalProperties: true },
);
