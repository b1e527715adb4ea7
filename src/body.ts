/**
 * Reads a JSON request body without ever holding more than `limit` bytes, whether or not the
 * client sent Content-Length (chunked bodies are counted as they arrive), and parses it only when
 * it is nested at most MAX_JSON_DEPTH deep (./json-depth.ts; a streamed body is counted as it
 * arrives, so one too deep is neither kept nor decoded).
 */
import { GatewayError } from "./errors";
import { DISCARDS, type DiscardBudget } from "./discard-budget";
import { NestingCounter, nestedDeeperThan } from "./json-depth";

/**
 * How much of a body over the limit is still read, and dropped, before the 413: a client that is
 * still sending when the answer comes and the connection closes (Node's fetch, the openai SDK under
 * Node) sees a broken pipe, not the 413, and retries the upload. A larger body is cut off.
 */
const MAX_DISCARDED_BYTES = 64 * 1024 * 1024;

/** The request's Content-Length, NaN when it has none (a chunked body). */
export function declaredLength(request: Request): number {
  return Number(request.headers.get("content-length") ?? NaN);
}

/**
 * Bodies of at most this many bytes are read whole (the request's own text(), the fast path) and
 * not counted against the in-flight budget: what they can hold is bounded by the connections,
 * each of which must send its bytes first. Larger chat and webhook bodies are counted as they
 * arrive; every other route's body may be no larger (src/app.ts).
 */
export const UNCOUNTED_BODY_BYTES = 65_536;

/**
 * The bytes of the bodies being read at once, against server.max_body_bytes_in_flight, counted as
 * they arrive (readLimited), never as declared: a declared length costs a client nothing to send,
 * and taken in advance, a few idle connections declaring large bodies would hold the whole budget
 * (26 sockets sending one byte each would refuse every chat request). So many slow
 * uploads cannot fill memory, and no upload that has not arrived holds any of it.
 */
export class BodyBudget {
  private inFlight = 0;
  constructor(readonly limit: number) {}

  /** Takes `bytes`; false (taking nothing) when that would pass the limit. */
  take(bytes: number): boolean {
    if (this.inFlight + bytes > this.limit) return false;
    this.inFlight += bytes;
    return true;
  }

  give(bytes: number): void {
    this.inFlight -= bytes;
  }
}

/**
 * How much of one body is read before the other connections get a turn. A reader's read() of bytes
 * already received resolves at once, so without a pause a loop would take a fast upload whole in
 * one go (11 MiB: about 5 ms in which no other request is answered).
 */
const BYTES_PER_TURN = 1024 * 1024;

/** Counts the bytes a loop reads; every BYTES_PER_TURN it waits for the event loop's next turn. */
class TurnShare {
  private bytes = 0;

  after(bytes: number): Promise<void> | undefined {
    this.bytes += bytes;
    if (this.bytes < BYTES_PER_TURN) return undefined;
    this.bytes = 0;
    return new Promise((resolve) => setImmediate(resolve));
  }
}

/** A streamed JSON body, parsed as it was counted, and its size in bytes as received. */
export interface JsonBody {
  value: unknown;
  bytes: number;
}

/**
 * A JSON body as read, refused early when its declared length (declaredLength) is over `limit`. Up
 * to UNCOUNTED_BODY_BYTES: its text, from the request's own text() promise (no wrapper to await
 * on the usual path), for parseJsonBody. Larger or chunked: counted as it arrives against `limit`
 * and `budget`, its nesting too (readLimited), so a body nested too deep is known from its first
 * chunks; it comes back parsed.
 */
export function readJsonBody(
  request: Request,
  limit: number,
  declared: number,
  budget: BodyBudget,
  discards: DiscardBudget = DISCARDS,
): Promise<string | JsonBody> {
  if (declared > limit) return refuseAfterReading(request, declared, limit, discards);
  return declared <= UNCOUNTED_BODY_BYTES ? request.text() : readLimited(request, limit, declared, budget, discards);
}

/**
 * The 413 for a declared length over the limit, once the body has been read and dropped (up to
 * MAX_DISCARDED_BYTES, and while `discards` has room: ./discard-budget.ts), a turn shared with
 * the other connections every BYTES_PER_TURN; held back (HOSTILE_BODY_HOLD_MS) when all of it was read.
 */
export async function refuseAfterReading(request: Request, declared: number, limit: number, discards: DiscardBudget = DISCARDS): Promise<never> {
  // (A client that sent `Expect: 100-continue` is sent on by Bun itself before the handler runs.)
  let whole = false;
  if (declared <= MAX_DISCARDED_BYTES && request.body && discards.take(declared)) {
    const reader = request.body.getReader();
    const turns = new TurnShare();
    try {
      // Up to the declared length: the body is whole then, whether or not its stream has said so.
      let seen = 0;
      while (seen < declared) {
        const next = await reader.read();
        if (next.done) break;
        seen += next.value.byteLength;
        await turns.after(next.value.byteLength);
      }
      whole = seen >= declared;
    } catch {
      // The client left: the 413 is recorded all the same.
    }
  }
  throw tooLarge(limit, whole);
}

/**
 * How long a model endpoint holds back the refusal of a body no client sends (nested too deep, or
 * over the size limit) before it answers, once the body has been received whole. Receiving one
 * costs the gateway about as much as a chat request, and a connection sends its next request only
 * once answered: held, one connection can make the gateway pay that at most ten times a second,
 * however fast it sends. The hold is a timer; a client that sent such a body by mistake has its 400
 * or 413 100 ms later. A body refused before its end is not held but its connection closed at once:
 * held open, the client would go on sending, and the kernel receiving (about 1.7 ms of CPU per 11
 * MiB refusal, measured with bench/refusal-cost.ts).
 */
export const HOSTILE_BODY_HOLD_MS = 100;

/**
 * How deeply a JSON body may nest arrays and objects. A chat request needs about a dozen levels
 * (tool schemas included). Deeper structure costs without bound once parsed: JSON.parse takes
 * 100,000 levels, but JSON.stringify of them (the body sent upstream) spends over a second of
 * the event loop before it fails.
 */
export const MAX_JSON_DEPTH = 64;

/** The body text as JSON; GatewayError (400, 413) when it is too large, empty, nested too deeply or not JSON. */
export function parseJsonBody(text: string, limit: number): unknown {
  if (text.length > limit) throw tooLarge(limit, true);
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) throw tooDeep(true);
  return parseJson(text);
}

/** Text whose nesting was counted, parsed. */
function parseJson(text: string): unknown {
  if (text.length === 0) throw new GatewayError("invalid_request_error", "The request body is empty; send a JSON object");
  try {
    return JSON.parse(text);
  } catch {
    throw new GatewayError("invalid_request_error", "The request body is not valid JSON");
  }
}

/**
 * The 400 for a body nested deeper than MAX_JSON_DEPTH: held back when the body was read whole,
 * else (the discard budget was spent) sent at once with `connection: close`, so no request is read
 * from the rest.
 */
function tooDeep(whole: boolean): GatewayError {
  const message = `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`;
  return new GatewayError("invalid_request_error", message, whole ? { holdMs: HOSTILE_BODY_HOLD_MS } : { headers: { connection: "close" } });
}

/**
 * A body read chunk by chunk: counted against `limit` and the in-flight `budget`, and its nesting
 * counted as it arrives. Once it is over the limit, or nested too deep, nothing more of it is kept:
 * the rest is read and dropped (while `discards` has room, up to MAX_DISCARDED_BYTES in all) and
 * then refused, so the client sees the answer; past that it is refused at once and the connection
 * closes unread. A bomb is thus never joined, decoded or scanned twice. Reading ends when the
 * `declared` length has arrived: one more read() only to learn that the stream has ended costs
 * about as much as a 200 KB chunk. A body refused in the chunk that completes it has nothing left
 * to drop, so it takes nothing of `discards` and its connection stays open. Every BYTES_PER_TURN
 * the other connections get a turn.
 */
async function readLimited(request: Request, limit: number, declared: number, budget: BodyBudget, discards: DiscardBudget): Promise<JsonBody> {
  if (!request.body) return { value: parseJson(""), bytes: 0 };
  const nesting = new NestingCounter(MAX_JSON_DEPTH);
  const chunks: Uint8Array[] = [];
  let size = 0;
  let seen = 0;
  let refusal: "too_large" | "too_deep" | null = null;
  let cut = false;
  // A reader's read() in a loop, not `for await` over the stream: a third less CPU per chunk.
  const reader = request.body.getReader();
  const turns = new TurnShare();
  let done = false;
  try {
    for (;;) {
      const next = await reader.read();
      if ((done = next.done)) break;
      const chunk = next.value;
      seen += chunk.byteLength;
      // Over the limit is a 413 even when the body was already known to nest too deep.
      if (seen > limit) refusal = "too_large";
      else if (refusal === null && nesting.deeperAfter(chunk)) refusal = "too_deep";
      if (refusal === null) {
        if (!budget.take(chunk.byteLength)) throw busyReading();
        size += chunk.byteLength;
        chunks.push(chunk);
      } else {
        budget.give(size);
        size = 0;
        chunks.length = 0;
      }
      if ((done = seen === declared)) break;
      // What is left of a refused body is read only to be dropped: within the discard budget.
      if (refusal !== null && (seen > MAX_DISCARDED_BYTES || !discards.take(chunk.byteLength))) {
        cut = true;
        break;
      }
      await turns.after(chunk.byteLength);
    }
  } finally {
    budget.give(size);
    // Left unread (cut off, or refused as busy): the stream is cancelled, as leaving a `for await` does.
    if (!done) await reader.cancel().catch(() => {});
  }
  if (refusal === "too_large") throw tooLarge(limit, !cut);
  if (refusal === "too_deep") throw tooDeep(!cut);
  return { value: parseJson(Buffer.concat(chunks).toString("utf8")), bytes: seen };
}

/** The 503 for a body whose next piece would pass server.max_body_bytes_in_flight; not read on, so the connection closes after it. */
function busyReading(): GatewayError {
  return new GatewayError(
    "service_unavailable",
    "The server is reading too many large request bodies at once (server.max_body_bytes_in_flight); try again shortly",
    {
      headers: { "retry-after": "1", connection: "close" },
    },
  );
}

/**
 * The 413 for a body over `limit`, held back when it was received `whole`. The connection is closed
 * after the answer: a body past MAX_DISCARDED_BYTES is not read to its end, and kept open the
 * connection would wait on bytes nobody reads (and hold up a graceful stop).
 */
export function tooLarge(limit: number, whole = false): GatewayError {
  const message = `The request body is larger than the limit of ${limit} bytes`;
  return new GatewayError("payload_too_large", message, { headers: { connection: "close" }, holdMs: whole ? HOSTILE_BODY_HOLD_MS : undefined });
}
