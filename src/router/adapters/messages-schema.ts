/**
 * The Messages API's request bodies as the OpenAPI document shows them (../endpoint-docs.ts). The
 * endpoint checks a body in code (./anthropic-wire.ts, and the translation for a chat target),
 * since what is accepted depends on the target: a native upstream reads fields no schema here lists.
 */
import { Type as t } from "@sinclair/typebox";

const Message = t.Object(
  {
    role: t.Union([t.Literal("user"), t.Literal("assistant"), t.Literal("system")]),
    content: t.Union([t.String(), t.Array(t.Object({ type: t.String() }, { additionalProperties: true }))], {
      description: "A string, or content blocks: text, image, tool_use, tool_result, thinking",
    }),
  },
  { additionalProperties: true },
);

const Fields = {
  model: t.String({ minLength: 1, description: "Model route identifier (GET /v1/models)" }),
  messages: t.Array(Message, { minItems: 1 }),
  system: t.Optional(t.Union([t.String(), t.Array(t.Object({ type: t.Literal("text"), text: t.String() }, { additionalProperties: true }))])),
  tools: t.Optional(
    t.Array(
      t.Object(
        { name: t.String(), description: t.Optional(t.String()), input_schema: t.Object({}, { additionalProperties: true }) },
        { additionalProperties: true },
      ),
    ),
  ),
};

export const MessagesRequest = t.Object(
  {
    ...Fields,
    max_tokens: t.Integer({ minimum: 1 }),
    stream: t.Optional(t.Boolean()),
    stop_sequences: t.Optional(t.Array(t.String())),
    temperature: t.Optional(t.Number()),
    top_p: t.Optional(t.Number()),
    tool_choice: t.Optional(t.Object({ type: t.String() }, { additionalProperties: true })),
    metadata: t.Optional(t.Object({ user_id: t.Optional(t.String()) }, { additionalProperties: true })),
  },
  { additionalProperties: true },
);

export const CountTokensRequest = t.Object(Fields, { additionalProperties: true });
