/**
 * Reads a JSON request body without ever holding more than `limit` bytes, whether or not the
 * client sent Content-Length (chunked bodies are counted as they arrive).
 */
import { GatewayError } from "./errors";

/** The request's Content-Length, NaN when it has none (a chunked body). */
export function declaredLength(request: Request): number {
  return Number(request.headers.get("content-length") ?? NaN);
}

/**
 * The body as text, refused early when its declared length (declaredLength) is over `limit`. With a
 * length, this is the request's own text() promise (no wrapper to await); a chunked body is counted
 * as it arrives.
 */
export function readBodyText(request: Request, limit: number, declared: number): Promise<string> {
  if (declared > limit) return Promise.reject(tooLarge(limit));
  return Number.isFinite(declared) ? request.text() : readLimited(request, limit);
}

/** The body text as JSON; GatewayError (400, 413) when it is too large, empty or not JSON. */
export function parseJsonBody(text: string, limit: number): unknown {
  if (text.length > limit) throw tooLarge(limit);
  if (text.length === 0) throw new GatewayError("invalid_request_error", "The request body is empty; send a JSON object");
  try {
    return JSON.parse(text);
  } catch {
    throw new GatewayError("invalid_request_error", "The request body is not valid JSON");
  }
}

async function readLimited(request: Request, limit: number): Promise<string> {
  if (!request.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) throw tooLarge(limit);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * The 413 for a body over `limit`. The rest of the body is never read, so the connection is closed
 * after the answer: kept open, it would wait on bytes nobody reads (and hold up a graceful stop).
 */
export function tooLarge(limit: number): GatewayError {
  return new GatewayError("payload_too_large", `The request body is larger than the limit of ${limit} bytes`, { headers: { connection: "close" } });
}
