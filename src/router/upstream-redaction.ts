/**
 * What an upstream wrote, made safe to pass on: its body without the gateway's own credentials
 * for it (should the upstream echo them: UpstreamState.secrets), and the gist of an error answer
 * for the message of the 502 that replaces it, the upstream's state and the log
 * (`upstream "gpu" answered 500: CUDA out of memory`).
 */
import { MIN_REDACTED } from "../config/secrets";

/** Longest excerpt of an upstream's error kept in a message. */
const MAX_EXCERPT = 200;

/**
 * `text` without any of `secrets`, each as written or as JSON escapes it (`"` and `\`, and `/` as
 * some servers do), in their order (the longer first, so a secret holding another goes whole).
 * A secret shorter than MIN_REDACTED is left in: taking out `api_key = "null"` would turn an
 * upstream's JSON error into invalid JSON, and `"e"` every message into `[redacted]rror`.
 */
export function withoutSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < MIN_REDACTED) continue;
    const escaped = JSON.stringify(secret).slice(1, -1);
    out = out.replaceAll(secret, "[redacted]");
    for (const form of new Set([escaped, escaped.replaceAll("/", "\\/")])) if (form !== secret) out = out.replaceAll(form, "[redacted]");
  }
  return out;
}

/**
 * The reason an error body gives: `error.message`, a string `error`, or `message` of a JSON body
 * (OpenAI's shape, FastAPI's `detail`, Ollama's `error`), or a body that is not JSON; one line, control
 * characters as spaces, at most MAX_EXCERPT characters, without `secrets`. Null when it says nothing.
 */
export function errorExcerpt(text: string, secrets: readonly string[]): string | null {
  const safe = withoutSecrets(text, secrets);
  let reason: unknown = safe;
  try {
    const body = JSON.parse(safe) as Record<string, unknown> | null;
    const error = body?.error as Record<string, unknown> | string | undefined;
    reason = [typeof error === "object" ? error?.message : error, body?.message, body?.detail].find((c) => typeof c === "string");
  } catch {
    // Not JSON: the text is the reason.
  }
  if (typeof reason !== "string") return null;
  // Again after parsing: JSON may spell a secret's characters as \u escapes (Go escapes & < >).
  let line = reason.replace(/[\p{Cc}\p{Cf}\s]+/gu, " ").trim();
  line = withoutSecrets(line, secrets);
  if (line === "") return null;
  const chars = [...line];
  return chars.length > MAX_EXCERPT ? `${chars.slice(0, MAX_EXCERPT).join("")}…` : line;
}
