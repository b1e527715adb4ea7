/**
 * The body an upstream is sent for one attempt: the gateway's own parse of the request (never the
 * client's bytes), with the target's model name set by the caller, and for a priced model the
 * completion limit its reservation assumed, in the field that target's upstream reads.
 */

/**
 * Sets `cap` in `field` unless the client set that field; first takes back what an earlier
 * attempt added in the other field (that target's upstream wanted it; this one may refuse it).
 * Returns the field it has added, or null.
 */
export function capTokens(body: Record<string, unknown>, field: string, cap: number, added: string | null): string | null {
  if (added === field) return added;
  if (added !== null) delete body[added];
  if (body[field] != null) return null;
  body[field] = cap;
  return field;
}

/** JSON text of the body; null when it is nested too deeply for JSON.stringify (which JSON.parse took). */
export function serialize(body: Record<string, unknown>): string | null {
  try {
    return JSON.stringify(body);
  } catch {
    return null;
  }
}
