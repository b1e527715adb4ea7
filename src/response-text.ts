/**
 * The body of an answer from a server the gateway calls (an upstream's model list or a non-streamed
 * chat answer over fetch, an OAuth provider's profile), read only up to a limit: a server that
 * answers without end must not fill the gateway's memory.
 */

/** The body as UTF-8 text, or null once it passes `limit` bytes (declared or read; the rest is not read). */
export async function responseText(response: Response, limit: number): Promise<string | null> {
  if (Number(response.headers.get("content-length") ?? 0) > limit) {
    await response.body?.cancel();
    return null;
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of (response.body ?? []) as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) return null; // leaving the loop cancels the stream
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
