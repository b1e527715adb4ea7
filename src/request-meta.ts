/**
 * Per-request facts set once when a request arrives: its id, its start time, and how to find the
 * client's address (the socket's, or X-Forwarded-For's when the socket is a trusted proxy).
 */
const metas = new WeakMap<Request, RequestMeta>();

export interface RequestMeta {
  id: string;
  startedAt: number;
  clientIp: (server: { requestIP(r: Request): { address: string } | null } | null) => string;
}

export function startRequest(request: Request, trustedProxies: ReadonlySet<string>): RequestMeta {
  const meta: RequestMeta = {
    id: `req_${crypto.randomUUID().replaceAll("-", "")}`,
    startedAt: performance.now(),
    clientIp: (server) => clientAddress(request, server?.requestIP(request)?.address ?? "127.0.0.1", trustedProxies),
  };
  metas.set(request, meta);
  return meta;
}

export function requestMeta(request: Request): RequestMeta {
  return metas.get(request) ?? startRequest(request, new Set());
}

function clientAddress(request: Request, socket: string, trusted: ReadonlySet<string>): string {
  const address = socket.startsWith("::ffff:") ? socket.slice(7) : socket;
  if (!trusted.has(address)) return address;
  const forwarded = request.headers.get("x-forwarded-for");
  if (!forwarded) return address;
  // The right-most entry not added by a trusted proxy is the client.
  const hops = forwarded.split(",").map((h) => h.trim()).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) if (!trusted.has(hops[i])) return hops[i];
  return hops[0] ?? address;
}
