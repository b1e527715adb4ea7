/**
 * A second reference point beside the bare proxy: the least a JSON-aware gateway built on
 * modelgate's own HTTP/1.1 client can do. Its chat route parses the body, sets the model,
 * serializes it again, sends it upstream through src/router/http1.ts and answers with the upstream's
 * text and two headers. No identity, limits, credits, validation, timeouts, records or logs: the
 * CPU modelgate spends above this one is what its features cost.
 * Run as a script: `bun bench/forwarder-floor.ts PORT UPSTREAM_ORIGIN` (GET /health answers when ready).
 */
import { http1Post, type Http1Origin } from "../src/router/http1";

export function startForwarderFloor(port: number, upstreamOrigin: string, model: string): { url: string; stop: () => void } {
  const upstream = new URL(upstreamOrigin);
  const origin: Http1Origin = {
    hostname: upstream.hostname,
    port: Number(upstream.port),
    requestHead: `POST /v1/chat/completions HTTP/1.1\r\nhost: ${upstream.host}\r\ncontent-type: application/json\r\naccept-encoding: identity\r\n`,
    connectTimeoutMs: 5_000,
    maxConnections: 64,
    name: "mock",
  };
  let requests = 0;
  const server = Bun.serve({
    port,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    routes: {
      "/health": new Response("ok"),
      "/v1/chat/completions": {
        async POST(request) {
          const body = JSON.parse(await request.text()) as Record<string, unknown>;
          body.model = model;
          const reply = await http1Post(origin, JSON.stringify(body)).reply;
          const text = reply.textNow() ?? (await reply.text());
          return new Response(text, { status: reply.status, headers: { "content-type": "application/json", "x-request-id": `req_${++requests}` } });
        },
      },
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

if (import.meta.main) {
  const forwarder = startForwarderFloor(Number(process.argv[2] ?? 0), process.argv[3] ?? "http://127.0.0.1:8081", process.argv[4] ?? "mock-small");
  console.log(forwarder.url);
}
