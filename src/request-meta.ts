/**
 * Per-request facts set once when a request arrives: its id, its start time, and how to find the
 * client's address (the socket's, or X-Forwarded-For's when the socket is a trusted proxy).
 * Ids are `req_` + a random per-process prefix + a counter of 12 hex digits (it starts at
 * 0x100000000000, so it needs no padding): unique across restarts, and far cheaper than a UUID.
 */
import { isIP } from "node:net";

const metas = new WeakMap<Request, RequestMeta>();
const PROCESS_PREFIX = `req_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
const NO_PROXIES: ReadonlySet<string> = new Set();
const FIRST_ID = 0x1000_0000_0000;
const PAST_LAST_ID = 0x1_0000_0000_0000;
let counter = FIRST_ID;

export interface RequestMeta {
  id: string;
  startedAt: number;
  clientIp: (server: { requestIP(r: Request): { address: string } | null } | null | undefined) => string;
}

/** Starts a request's meta and keeps it for the handlers after the app's hook (requestMeta). */
export function startRequest(request: Request, trustedProxies: ReadonlySet<string>): RequestMeta {
  const meta = newMeta(request, trustedProxies);
  metas.set(request, meta);
  return meta;
}

/** The meta started for this request, or a new one for a request no hook saw (the chat route). */
export function requestMeta(request: Request, trustedProxies: ReadonlySet<string> = NO_PROXIES): RequestMeta {
  return metas.get(request) ?? newMeta(request, trustedProxies);
}

function newMeta(request: Request, trustedProxies: ReadonlySet<string>): RequestMeta {
  if (++counter === PAST_LAST_ID) counter = FIRST_ID;
  return {
    id: PROCESS_PREFIX + counter.toString(16),
    startedAt: performance.now(),
    clientIp: (server) => clientAddress(request, server?.requestIP(request)?.address ?? "127.0.0.1", trustedProxies),
  };
}

function clientAddress(request: Request, socket: string, trusted: ReadonlySet<string>): string {
  const address = unmapped(socket);
  if (!trusted.has(address)) return address;
  const forwarded = request.headers.get("x-forwarded-for");
  if (!forwarded) return address;
  // The right-most entry not added by a trusted proxy is the client. It must be an IP address:
  // anything else was passed through from the client, and would be a rate-limit subject of its
  // choosing (any length, any number of them); such requests count as the proxy's own.
  const hops = forwarded.split(",").map((h) => unmapped(h.trim())).filter(Boolean);
  let i = hops.length - 1;
  while (i > 0 && trusted.has(hops[i])) i--;
  const client = hops[i];
  return client !== undefined && isAddress(client) ? client : address;
}

/** An IPv4 address written as IPv6 (`::ffff:1.2.3.4`), as the IPv4 address it is. */
function unmapped(address: string): string {
  return address.startsWith("::ffff:") && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/** A plain IP address: IPv6 at most 39 characters and without a zone (`%eth0` takes any length). */
function isAddress(text: string): boolean {
  return text.length <= 39 && !text.includes("%") && isIP(text) !== 0;
}
