/**
 * The fetch client of an upstream exchange (./exchange.ts): for https upstreams, for its TLS, and
 * for every upstream when an HTTP proxy is set in the environment, for its proxy support.
 */
import { responseText } from "../response-text";
import { answerTooLarge, MAX_ANSWER_BYTES, UpstreamFailure, type UpstreamExchange, type UpstreamReply } from "./exchange";

export const USES_PROXY = Boolean(process.env.HTTP_PROXY || process.env.HTTPS_PROXY || process.env.http_proxy || process.env.https_proxy);

/** POSTs `body` through fetch (a stream is sent as it is read); `name` is the upstream's, for messages. */
export function fetchPost(name: string, url: string, headers: Readonly<Record<string, string>>, body: string | ReadableStream<Uint8Array>): UpstreamExchange {
  const controller = new AbortController();
  // A redirect is answered, not followed, as by the http1 client: forward.ts fails it over.
  const reply = fetch(url, { method: "POST", headers, body, signal: controller.signal, redirect: "manual" }).then(
    (response) => new FetchReply(name, response, controller),
    (err: unknown) => {
      throw controller.signal.aborted
        ? new UpstreamFailure("aborted", String(controller.signal.reason?.message ?? "aborted"))
        : new UpstreamFailure("refused", fetchFailure(name, err, "before its answer arrived"));
    },
  );
  return { reply, abort: (reason) => controller.abort(new Error(reason)) };
}

/**
 * A failed fetch in the gateway's words, with fetch's error code (`ECONNRESET`,
 * `InvalidContentLength`) but never its message: that quotes the URL, base_url's query and any
 * key in it included, and would reach the client's 502, /api/status and the log.
 */
function fetchFailure(name: string, err: unknown, when: string): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "ECONNREFUSED" || code === "ConnectionRefused") return `upstream "${name}" is unreachable (connection refused)`;
  const shown = typeof code === "string" && /^[A-Za-z0-9_]{1,64}$/.test(code) ? ` (${code})` : "";
  return `upstream "${name}" failed ${when}${shown}`;
}

class FetchReply implements UpstreamReply {
  readonly status: number;
  readonly closeDelimited: boolean;

  constructor(
    private readonly name: string,
    private readonly response: Response,
    private readonly controller: AbortController,
  ) {
    this.status = response.status;
    // fetch keeps the framing headers it read: with neither, the body ended with the connection.
    const headers = response.headers;
    this.closeDelimited = !headers.has("content-length") && !headers.has("transfer-encoding");
  }

  header(name: string): string | null {
    return this.response.headers.get(name);
  }

  textNow(): null {
    return null;
  }

  /** The body, read to its end or to MAX_ANSWER_BYTES, whichever comes first. */
  async text(): Promise<string> {
    let text: string | null;
    try {
      text = await responseText(this.response, MAX_ANSWER_BYTES);
    } catch (err) {
      if (err instanceof UpstreamFailure) throw err;
      throw new UpstreamFailure(this.controller.signal.aborted ? "aborted" : "broken", fetchFailure(this.name, err, "in the middle of its answer"));
    }
    if (text !== null) return text;
    const failure = answerTooLarge(this.name);
    this.controller.abort(failure);
    throw failure;
  }

  body(): ReadableStream<Uint8Array> {
    return this.response.body ?? new Response("").body!;
  }
}
