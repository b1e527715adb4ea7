/**
 * An upstream's `post`: one request to any path under its base_url. Chat keeps its own prepared
 * request (postChat, the hot path); JSON to other paths goes by the same client and over the same
 * connections (so under the same max_connections), each path with its request head made once; an
 * upload's stream goes through fetch, which sends a request body as it is read.
 */
import { http1Post, type Http1Origin } from "./http1";
import type { UpstreamExchange } from "./exchange";
import { fetchPost } from "./fetch-exchange";

export interface PostSetup {
  name: string;
  base: URL;
  /** The headers chat requests are sent with (authorization included). */
  headers: Readonly<Record<string, string>>;
  /** The upstream's origin for the http1 client (its connections); other paths send their own request head. */
  origin: Http1Origin;
  viaFetch: boolean;
  postChat: (body: string) => UpstreamExchange;
}

/** `extraHeaders`: headers of this one request beside the upstream's own (a client's, passed on to a native API). */
export type UpstreamPost = (
  path: string,
  body: string | ReadableStream<Uint8Array>,
  contentType?: string,
  extraHeaders?: Readonly<Record<string, string>>,
) => UpstreamExchange;

export function createPost(setup: PostSetup): UpstreamPost {
  // Answers other than chat's are of any type (audio, text), so any is accepted.
  const headers = { ...setup.headers, accept: "*/*" };
  const paths = new Map<string, { url: URL; requestHead: string }>();
  const pathFor = (path: string): { url: URL; requestHead: string } => {
    let known = paths.get(path);
    if (!known) {
      const url = endpointUrl(setup.base, path);
      const lines = Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join("");
      known = { url, requestHead: `POST ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\naccept-encoding: identity\r\n${lines}` };
      paths.set(path, known);
    }
    return known;
  };
  return (path, body, contentType = "application/json", extraHeaders) => {
    if (path === "chat/completions" && typeof body === "string" && extraHeaders === undefined) return setup.postChat(body);
    const { url, requestHead } = pathFor(path);
    // Header values came through Bun's Headers, which refuse CR, LF and NUL: a line each is safe.
    const extra =
      extraHeaders === undefined
        ? ""
        : Object.entries(extraHeaders)
            .map(([k, v]) => `${k}: ${v}\r\n`)
            .join("");
    if (typeof body === "string" && !setup.viaFetch) return http1Post(setup.origin, body, requestHead + extra);
    return fetchPost(setup.name, url.href, { ...headers, "content-type": contentType, ...extraHeaders }, body);
  };
}

/**
 * `endpoint` under base_url: appended to its path, its query kept (`?api-version=…`), its fragment
 * dropped, and its user and password left out (they travel as a header: ./upstream-setup.ts).
 */
export function endpointUrl(base: URL, endpoint: string): URL {
  const url = new URL(base.href);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/${endpoint}`;
  url.hash = "";
  url.username = "";
  url.password = "";
  return url;
}
