/**
 * An upstream's `post`: one request to any path under its base_url. Chat keeps its own prepared
 * request (postChat, the hot path); JSON to other paths goes by the same client, each path with
 * its request head made once (and so its own idle connections); an upload's stream goes through
 * fetch, which sends a request body as it is read.
 */
import { http1Post, type Http1Origin } from "./http1";
import { fetchPost, type UpstreamExchange } from "./upstream-client";

export interface PostSetup {
  name: string;
  base: URL;
  /** The headers chat requests are sent with (authorization included). */
  headers: Readonly<Record<string, string>>;
  /** Chat's origin for the http1 client; other paths copy it with their own request head. */
  origin: Http1Origin;
  viaFetch: boolean;
  postChat: (body: string) => UpstreamExchange;
}

export type UpstreamPost = (path: string, body: string | ReadableStream<Uint8Array>, contentType?: string) => UpstreamExchange;

export function createPost(setup: PostSetup): UpstreamPost {
  // Answers other than chat's are of any type (audio, text), so any is accepted.
  const headers = { ...setup.headers, accept: "*/*" };
  const paths = new Map<string, { url: URL; origin: Http1Origin }>();
  const pathFor = (path: string): { url: URL; origin: Http1Origin } => {
    let known = paths.get(path);
    if (!known) {
      const url = endpointUrl(setup.base, path);
      const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
      known = { url, origin: { ...setup.origin, requestHead: `POST ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\naccept-encoding: identity\r\n${lines}` } };
      paths.set(path, known);
    }
    return known;
  };
  return (path, body, contentType = "application/json") => {
    if (path === "chat/completions" && typeof body === "string") return setup.postChat(body);
    const { url, origin } = pathFor(path);
    if (typeof body === "string" && !setup.viaFetch) return http1Post(origin, body);
    return fetchPost(setup.name, url.href, { ...headers, "content-type": contentType }, body);
  };
}

/**
 * `endpoint` under base_url: appended to its path, its query kept (`?api-version=…`), its fragment
 * dropped, and its user and password left out (they travel as a header: ./upstream-state.ts).
 */
export function endpointUrl(base: URL, endpoint: string): URL {
  const url = new URL(base.href);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/${endpoint}`;
  url.hash = "";
  url.username = "";
  url.password = "";
  return url;
}
