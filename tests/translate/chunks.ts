/**
 * Chat-completion streams as upstreams send them (vLLM / llama.cpp style: a role chunk, content
 * or reasoning fragments, tool calls whose arguments arrive split, a finish chunk, then the
 * include_usage chunk with empty choices), and `collect`, which folds such a stream into the
 * non-streamed chat.completion the same upstream would answer: the stream translators' output
 * must equal the answer translators' output on it.
 */
type Chunk = Record<string, any>;

function chunk(delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}): Chunk {
  return { id: "chatcmpl-abc123", object: "chat.completion.chunk", created: 1, model: "up", choices: [{ index: 0, delta, finish_reason: finish, ...extra }] };
}

function usage(prompt: number, completion: number, cached = 0): Chunk {
  const u: Record<string, unknown> = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  if (cached) u.prompt_tokens_details = { cached_tokens: cached };
  return { id: "chatcmpl-abc123", object: "chat.completion.chunk", created: 1, model: "up", choices: [], usage: u };
}

export const TEXT: Chunk[] = [
  chunk({ role: "assistant", content: "" }),
  chunk({ content: "Hello" }),
  chunk({ content: ', "world"\n' }),
  chunk({ content: "ünïcode ✓" }),
  chunk({}, "stop"),
  usage(12, 5, 4),
];

export const REASONING: Chunk[] = [
  chunk({ role: "assistant", content: null, reasoning_content: "Let me " }),
  chunk({ reasoning_content: "think." }),
  chunk({ content: "42" }),
  chunk({}, "stop"),
  usage(7, 9),
];

export const TOOLS: Chunk[] = [
  chunk({ role: "assistant", content: "Checking." }),
  chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: ' "Paris"}' } }] }),
  chunk({ tool_calls: [{ index: 1, id: "call_2", type: "function", function: { name: "get_time", arguments: '{"tz"' } }] }),
  chunk({ tool_calls: [{ index: 1, function: { arguments: ': "CET"}' } }] }),
  chunk({}, "tool_calls"),
  usage(30, 20),
];

export const STOP_SEQUENCE: Chunk[] = [chunk({ role: "assistant", content: "one two" }), chunk({}, "stop", { stop_reason: "END" }), usage(3, 2)];

export const REFUSAL: Chunk[] = [
  chunk({ role: "assistant", content: null, refusal: "I can't " }),
  chunk({ refusal: "help with that." }),
  chunk({}, "stop"),
  usage(4, 6),
];

/** An upstream that goes back to reasoning after some text. */
export const INTERLEAVED: Chunk[] = [
  chunk({ role: "assistant", reasoning_content: "First." }),
  chunk({ content: "Part one." }),
  chunk({ reasoning_content: "Then." }),
  chunk({ content: "Part two." }),
  chunk({}, "stop"),
  usage(5, 8),
];

export const LENGTH: Chunk[] = [chunk({ role: "assistant", content: "cut" }), chunk({}, "length"), usage(3, 1)];

/** The non-streamed chat.completion an upstream would give for these chunks. */
export function collect(chunks: Chunk[]): Chunk {
  const message: Record<string, any> = { role: "assistant", content: null };
  const choice: Record<string, any> = { index: 0, message, finish_reason: null };
  let usageReport: unknown;
  for (const c of chunks) {
    if (c.usage) usageReport = c.usage;
    const ch = c.choices[0];
    if (!ch) continue;
    const d = ch.delta;
    if (d.content) message.content = (message.content ?? "") + d.content;
    if (d.refusal) message.refusal = (message.refusal ?? "") + d.refusal;
    if (d.reasoning_content) message.reasoning_content = (message.reasoning_content ?? "") + d.reasoning_content;
    for (const call of d.tool_calls ?? []) {
      message.tool_calls ??= [];
      const known = message.tool_calls[call.index];
      if (known) known.function.arguments += call.function.arguments ?? "";
      else message.tool_calls[call.index] = { id: call.id, type: "function", function: { name: call.function.name, arguments: call.function.arguments ?? "" } };
    }
    for (const [key, value] of Object.entries(ch)) if (key !== "delta" && key !== "index" && value !== null) choice[key] = value;
  }
  return { id: "chatcmpl-abc123", object: "chat.completion", created: 1, model: "up", choices: [choice], usage: usageReport };
}
