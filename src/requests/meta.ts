/**
 * Per-request facts set once when a request arrives: its id, its start time, and how to find the
 * client's address (./client-address.ts).
 * Ids are `req_` + a random per-process prefix + a counter of 12 hex digits (it starts at
 * 0x100000000000, so it needs no padding): unique across restarts, and far cheaper than a UUID.
 */
import { clientAddress, type TrustedProxies } from "../client-address";

const metas = new WeakMap<Request, RequestMeta>();
const PROCESS_PREFIX = `req_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
const NO_PROXIES: TrustedProxies = { has: () => false };
const FIRST_ID = 0x1000_0000_0000;
const PAST_LAST_ID = 0x1_0000_0000_0000;
let counter = FIRST_ID;

export interface RequestMeta {
  id: string;
  startedAt: number;
  clientIp: (server: { requestIP(r: Request): { address: string } | null } | null | undefined) => string;
}

/** Starts a request's meta and keeps it for the handlers after the app's hook (requestMeta). */
export function startRequest(request: Request, trustedProxies: TrustedProxies): RequestMeta {
  const meta = newMeta(request, trustedProxies);
  metas.set(request, meta);
  return meta;
}

/** The meta started for this request, or a new one for a request no hook saw (the chat route). */
export function requestMeta(request: Request, trustedProxies: TrustedProxies = NO_PROXIES): RequestMeta {
  return metas.get(request) ?? newMeta(request, trustedProxies);
}

/** A new request id (the webhook ingress gives its answers one too). */
export function nextRequestId(): string {
  if (++counter === PAST_LAST_ID) counter = FIRST_ID;
  return PROCESS_PREFIX + counter.toString(16);
}

function newMeta(request: Request, trustedProxies: TrustedProxies): RequestMeta {
  return {
    id: nextRequestId(),
    startedAt: performance.now(),
    clientIp: (server) => clientAddress(request, server?.requestIP(request)?.address ?? "127.0.0.1", trustedProxies),
  };
}
