/**
 * The floor any Bun gateway can reach: a bare pass-through proxy. Bun.serve reads the request
 * body, fetches the same path from the upstream origin and returns the upstream's Response as is
 * (streams stay streams). No parsing, validation, logging or accounting: whatever a real gateway
 * adds on top of this is its own overhead.
 * Run as a script: `bun bench/proxy-floor.ts PORT UPSTREAM_ORIGIN` (prints its URL when ready).
 */
export function startProxyFloor(port: number, upstreamOrigin: string): { url: string; stop: () => void } {
  const server = Bun.serve({
    port,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(request): Promise<Response> {
      const url = new URL(request.url);
      const body = request.method === "GET" || request.method === "HEAD" ? undefined : await request.arrayBuffer();
      return fetch(upstreamOrigin + url.pathname + url.search, { method: request.method, headers: request.headers, body });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

if (import.meta.main) {
  const proxy = startProxyFloor(Number(process.argv[2] ?? 0), process.argv[3] ?? "http://127.0.0.1:8081");
  console.log(proxy.url);
}
