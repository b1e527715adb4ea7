/**
 * The body an upstream is sent for one attempt: the gateway's own parse of the request (never the
 * client's bytes), with the target's model name set by the caller, and for a priced model a
 * completion limit in the one field that target's upstream reads.
 */

/**
 * The completion limit a priced request is sent, and how: the client's own (max_tokens or
 * max_completion_tokens, whichever it set), else `reserved`, the limit its reservation assumed;
 * null when the client set both (its request is passed on as it is).
 */
export function tokenLimitToSend(body: Record<string, unknown>, reserved: number): number | null {
  const maxTokens = body.max_tokens;
  const maxCompletionTokens = body.max_completion_tokens;
  if (maxTokens != null && maxCompletionTokens != null) return null;
  return (maxTokens ?? maxCompletionTokens ?? reserved) as number;
}

/**
 * Puts `limit` in the one field `field` names, the other removed: an upstream reads one of them
 * (Ollama only max_tokens) and may refuse both at once (OpenAI does), so a client's limit goes
 * where this target's upstream reads it. "none" leaves the body as it is.
 */
export function setTokenLimit(body: Record<string, unknown>, field: "max_tokens" | "max_completion_tokens" | "none", limit: number): void {
  if (field === "none") return;
  delete body.max_tokens;
  delete body.max_completion_tokens;
  body[field] = limit;
}

/** JSON text of the body; null when it is nested too deeply for JSON.stringify (which JSON.parse took). */
export function serialize(body: Record<string, unknown>): string | null {
  try {
    return JSON.stringify(body);
  } catch {
    return null;
  }
}
