/**
 * The balancer's process (./round-robin.ts starts it): argv are the targets; it prints its port.
 * A process of its own because fetch's connections are shared by a whole process: in the test's,
 * a burst of client requests would hold every one the balancer needs to pass them on.
 */
const targets = process.argv.slice(2);
let next = 0;
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  idleTimeout: 120,
  async fetch(request) {
    const target = targets[next++ % targets.length];
    const url = new URL(request.url);
    const headers = new Headers(request.headers);
    headers.delete("host");
    const body = request.method === "GET" || request.method === "HEAD" ? undefined : await request.arrayBuffer();
    return fetch(`${target}${url.pathname}${url.search}`, { method: request.method, headers, body, redirect: "manual" });
  },
});
console.log(server.port);
