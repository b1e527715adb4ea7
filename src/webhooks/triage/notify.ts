/**
 * The notifiers: one Message (./message.ts) sent to one `notify` target in its service's own
 * request format. slack (incoming webhook: `text`), discord (webhook: `content`, at most 2,000
 * characters), ntfy (the body is the text; Title, Priority and Tags headers from the status and
 * severity), gotify (POST /message with X-Gotify-Key; priority from severity), matrix (the
 * client-server API: PUT an m.room.message with a transaction id, so a repeat of the same
 * delivery is one event; a resolved alert is a reply to its firing one), webhook (the message as
 * JSON). A 2xx is sent; a 4xx other than 408 and 429 is permanent (the request itself is wrong:
 * a revoked URL or token), anything else may pass later.
 */
import type { NotifierConfig } from "../../config/webhooks-schema";
import { redactedUrl } from "../../config/redact";
import type { Message } from "./message";
import type { Severity } from "./alert";

export type SendResult = { ok: true; remoteId: string | null } | { ok: false; error: string; permanent: boolean };

export interface SendOptions {
  /** Names this delivery for services that fold repeats (Matrix's transaction id). */
  deliveryId: string;
  /** The service's id for the message this one follows up (a Matrix event id), if it was sent there. */
  replyTo: string | null;
  timeoutMs: number;
  signal: AbortSignal;
}

const DISCORD_MAX = 2_000;
/** ntfy priorities 1–5 (min … urgent). */
const NTFY_PRIORITY: Record<Severity, string> = { critical: "5", warning: "4", info: "3" };
/** Gotify priorities 0–10; Gotify's apps notify loudly from 8. */
const GOTIFY_PRIORITY: Record<Severity, number> = { critical: 8, warning: 5, info: 2 };

function ntfyTags(message: Message): string {
  if (message.status === "resolved") return "white_check_mark";
  if (message.severity === "critical") return "rotating_light";
  if (message.severity === "warning") return "warning";
  return "information_source";
}

function priorityOf(message: Message): Severity {
  return message.status === "resolved" ? "info" : (message.severity ?? "warning");
}

function plain(message: Message): string {
  return message.text ? `${message.title}\n\n${message.text}` : message.title;
}

interface Built {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
}

function build(target: NotifierConfig, message: Message, options: SendOptions): Built {
  const json = { "content-type": "application/json" };
  switch (target.kind) {
    case "slack":
      return {
        url: target.url!,
        method: "POST",
        headers: json,
        body: JSON.stringify({ text: `*${message.title}*${message.text ? `\n${message.text}` : ""}` }),
      };
    case "discord": {
      const content = `**${message.title}**${message.text ? `\n${message.text}` : ""}`;
      return {
        url: target.url!,
        method: "POST",
        headers: json,
        body: JSON.stringify({ content: content.length > DISCORD_MAX ? `${content.slice(0, DISCORD_MAX - 1)}…` : content }),
      };
    }
    case "ntfy": {
      const headers: Record<string, string> = {
        "content-type": "text/plain; charset=utf-8",
        // Header values must be ASCII: the title is sent RFC 2047-encoded, which ntfy decodes.
        title: `=?UTF-8?B?${Buffer.from(message.title).toString("base64")}?=`,
        priority: NTFY_PRIORITY[priorityOf(message)],
        tags: ntfyTags(message),
      };
      if (target.token) headers.authorization = `Bearer ${target.token}`;
      return { url: target.url!, method: "POST", headers, body: message.text || message.title };
    }
    case "gotify":
      return {
        url: `${target.url!.replace(/\/+$/, "")}/message`,
        method: "POST",
        headers: { ...json, "x-gotify-key": target.token! },
        body: JSON.stringify({ title: message.title, message: message.text || message.title, priority: GOTIFY_PRIORITY[priorityOf(message)] }),
      };
    case "matrix": {
      const content: Record<string, unknown> = { msgtype: "m.text", body: plain(message) };
      if (options.replyTo) content["m.relates_to"] = { "m.in_reply_to": { event_id: options.replyTo } };
      const room = encodeURIComponent(target.room!);
      return {
        url: `${target.homeserver!.replace(/\/+$/, "")}/_matrix/client/v3/rooms/${room}/send/m.room.message/${encodeURIComponent(options.deliveryId)}`,
        method: "PUT",
        headers: { ...json, authorization: `Bearer ${target.token!}` },
        body: JSON.stringify(content),
      };
    }
    case "webhook":
      return {
        url: target.url!,
        method: "POST",
        headers: json,
        body: JSON.stringify({
          title: message.title,
          text: message.text,
          status: message.status,
          severity: message.severity,
          kind: message.kind,
          summary: message.summary,
        }),
      };
  }
}

/** The id a service gave the message: Matrix's event_id, Gotify's id. */
async function remoteIdOf(response: Response): Promise<string | null> {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    const id = body.event_id ?? body.id;
    return typeof id === "string" || typeof id === "number" ? String(id) : null;
  } catch {
    return null;
  }
}

export async function sendMessage(target: NotifierConfig, message: Message, options: SendOptions): Promise<SendResult> {
  const built = build(target, message, options);
  // A webhook URL's path and query are usually its key: reasons name it as `config check` shows it.
  const shown = redactedUrl(built.url, { path: true });
  try {
    const response = await fetch(built.url, {
      method: built.method,
      headers: built.headers,
      body: built.body,
      redirect: "manual",
      signal: AbortSignal.any([AbortSignal.timeout(options.timeoutMs), options.signal]),
    });
    if (response.ok) return { ok: true, remoteId: await remoteIdOf(response) };
    const said = (await response.text().catch(() => "")).replace(/\s+/g, " ").trim().slice(0, 200);
    const permanent = response.status >= 400 && response.status < 500 && response.status !== 408 && response.status !== 429;
    return { ok: false, permanent, error: `${target.kind}: HTTP ${response.status} from ${shown}${said ? `: ${said}` : ""}` };
  } catch (error) {
    const name = (error as Error)?.name;
    const why =
      name === "TimeoutError"
        ? `no answer within ${options.timeoutMs} ms`
        : String((error as Error)?.message ?? error).replace(/https?:\/\/[^\s"]+/gi, (found) => redactedUrl(found, { path: true }));
    return { ok: false, permanent: false, error: `${target.kind}: ${shown}: ${why}` };
  }
}
