/**
 * `POST /v1/messages/count_tokens` for an upstream that does not serve it: an estimate.
 *
 *   estimateInputTokens(body) -> { input_tokens } | { error: { status: 400, type, message } }
 *
 * The body is checked exactly as /v1/messages checks it (max_tokens is not needed here), so a
 * request that counts is one that would be accepted. The estimate is
 *   ceil(characters / 4) + 4 per message + 1,600 per image
 * where the characters are those the upstream would read: message text, reasoning, tool-call
 * names and arguments, tool results, and each tool's name, description and JSON schema.
 * Why: the gateway holds no tokenizer for an arbitrary upstream model, and BPE tokenizers of
 * current models average close to 4 characters of English or code per token; the 4 per message
 * stands for the role markers a chat template adds; 1,600 is what Anthropic documents as the most
 * an image costs once resized (about 1.15 megapixels / 750), so an image is never undercounted.
 * It is an estimate for budgeting a context window, never what a request is charged: charges
 * come from the usage the upstream reports.
 */
import { messagesToChat, type MessagesRequestError } from "./anthropic-request";
import type { ChatMessage, ChatTool } from "./chat";

const CHARS_PER_TOKEN = 4;
const TOKENS_PER_MESSAGE = 4;
const TOKENS_PER_IMAGE = 1600;

export function estimateInputTokens(body: unknown): { input_tokens: number } | { error: MessagesRequestError } {
  const translated = messagesToChat(body, { maxTokens: "optional" });
  if ("error" in translated) return translated;
  const { messages } = translated.chat;
  const tools = translated.chat.tools as ChatTool[] | undefined;
  let chars = 0;
  let images = 0;
  for (const message of messages) {
    const counted = messageSize(message);
    chars += counted.chars;
    images += counted.images;
  }
  if (tools) for (const tool of tools) chars += JSON.stringify(tool.function).length;
  return { input_tokens: Math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * messages.length + TOKENS_PER_IMAGE * images };
}

function messageSize(message: ChatMessage): { chars: number; images: number } {
  let chars = message.reasoning_content?.length ?? 0;
  let images = 0;
  if (typeof message.content === "string") chars += message.content.length;
  else if (Array.isArray(message.content)) {
    for (const part of message.content) {
      if (part.type === "text") chars += part.text.length;
      else images++;
    }
  }
  for (const call of message.tool_calls ?? []) chars += call.function.name.length + call.function.arguments.length;
  return { chars, images };
}
