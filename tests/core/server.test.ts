/**
 * The listening server, against the compiled binary: a second server on a port that is taken
 * stops naming server.listen (the port is not shared: that would split rate limits and credit
 * reservations between two processes), a body far past max_body_bytes gets the JSON 413,
 * not the HTTP layer's empty one, and many slow uploads cannot hold more than
 * max_body_bytes_in_flight (regression: 200 stalled 10 MB uploads held 2 GB).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { BINARY, startGateway, type RunningGateway } from "../support/binary";
import { listenUrl } from "../../src/listen";
import { freePort } from "../support/binary";
import { startMockUpstream } from "../support/mock-upstream";
import { eventually } from "../support/eventually";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { Database } from "bun:sqlite";

const started: RunningGateway[] = [];
afterAll(async () => {
  for (const gateway of started) await gateway.stop();
});

describe("the server", () => {
  test("a second server on a port in use exits naming server.listen, and the first keeps serving", async () => {
    const first = await startGateway();
    started.push(first);
    const second = Bun.spawn([BINARY, "serve"], {
      cwd: first.dir,
      env: { ...process.env, MODELGATE_CONFIG: join(first.dir, "modelgate.toml") },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, stderr] = await Promise.all([second.exited, new Response(second.stderr).text()]);
    expect(code).toBe(1);
    expect(stderr).toContain(`server.listen = "127.0.0.1:${first.port}"`);
    expect(stderr).toContain("in use");
    expect(stderr).not.toContain("    at ");
    for (let i = 0; i < 20; i++) expect((await fetch(`${first.url}/api/health`)).status).toBe(200);
  });

  test("a listen host name that does not resolve is named as such (regression: a bare EINVAL or ENOENT)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-test-"));
    const port = freePort();
    writeFileSync(join(dir, "modelgate.toml"), `[server]\nlisten = "nohost.invalid:${port}"\ndata_dir = "${join(dir, "data")}"\n`);
    const proc = Bun.spawn([BINARY, "serve"], {
      cwd: dir,
      env: { ...process.env, MODELGATE_CONFIG: join(dir, "modelgate.toml") },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    expect(code).toBe(1);
    // In the OS's words' place, which spoke of a missing file (ENOENT: no such file or directory).
    expect(stderr).toContain(
      `modelgate: server.listen = "nohost.invalid:${port}": the host name "nohost.invalid" does not resolve to an address of this machine\n`,
    );
    expect(stderr).not.toContain("ENOENT");
  });

  test("bodies far past max_body_bytes get the JSON 413; a chunked body to a form route gets 411", async () => {
    const gateway = await startGateway("[server]\nmax_body_bytes = 2000\n");
    started.push(gateway);
    for (const path of ["/v1/chat/completions", "/auth/login"]) {
      for (const size of [2_001, 5_000, 500_000]) {
        const response = await fetch(`${gateway.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: "x".repeat(size) });
        expect(response.status).toBe(413);
        expect(response.headers.get("x-request-id")).toStartWith("req_");
        expect(((await response.json()) as any).error).toMatchObject({
          code: "payload_too_large",
          message: "The request body is larger than the limit of 2000 bytes",
        });
      }
    }
    const chunked = (path: string) =>
      fetch(`${gateway.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode("x".repeat(5_000))), c.close()) }),
      });
    const form = await chunked("/auth/login");
    expect(form.status).toBe(411);
    expect(((await form.json()) as any).error.code).toBe("length_required");
    const chat = await chunked("/v1/chat/completions");
    expect(chat.status).toBe(413);
    expect(((await chat.json()) as any).error.code).toBe("payload_too_large");
  });

  test("a body to any route but chat is at most 64 KiB, whatever max_body_bytes allows (regression: sign-in took 10 MiB bodies, read whole before any check)", async () => {
    const gateway = await startGateway();
    started.push(gateway);
    for (const path of ["/auth/login", "/auth/signup", "/setup", "/dashboard/keys", "/api/admin/credits"]) {
      const response = await fetch(`${gateway.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: "x".repeat(65_537) });
      expect([path, response.status]).toEqual([path, 413]);
      expect(((await response.json()) as any).error.message).toBe("The request body is larger than the limit of 65536 bytes");
    }
    // Chat takes max_body_bytes, with a trailing slash too (regression: that one got the 64 KiB cap).
    for (const path of ["/v1/chat/completions", "/v1/chat/completions/"]) {
      const chat = await fetch(`${gateway.url}${path}`, {
        method: "POST",
        body: JSON.stringify({ model: "none", messages: [{ role: "user", content: "x".repeat(70_000) }] }),
      });
      expect([path, chat.status]).toEqual([path, 404]);
    }
  });

  test("a body over the limit is read before the 413, so Node's fetch gets the answer, not a broken pipe (regression: EPIPE, and the SDK uploaded again)", async () => {
    const gateway = await startGateway("[server]\nmax_body_bytes = 1048576\n");
    started.push(gateway);
    const node = Bun.spawn(["node", join(import.meta.dir, "../support/node-post.mjs"), `${gateway.url}/v1/chat/completions`, String(11_000_000), "6"], {
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, code] = await Promise.all([new Response(node.stdout).text(), node.exited]);
    expect(code).toBe(0);
    expect(out.trim().split("\n")).toEqual(Array(6).fill("413 payload_too_large"));
  });

  test("an upload over the limit holds none of the in-flight budget while it is dropped (regression: others got a 503 meanwhile)", async () => {
    const gateway = await startGateway("[server]\nmax_body_bytes = 2048\nmax_body_bytes_in_flight = 2048\n");
    started.push(gateway);
    const slow = await Bun.connect({ hostname: "127.0.0.1", port: gateway.port, socket: { data() {} } });
    slow.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n{"model":`);
    await Bun.sleep(50); // the gateway has read the head and is dropping the body as it trickles in
    const other = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "nope", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(other.status).toBe(404); // read and routed, not refused as busy
    slow.end();
  });

  test("a client that leaves in the middle of its body is not logged as an unhandled error", async () => {
    const gateway = await startGateway();
    started.push(gateway);
    for (let i = 0; i < 5; i++) {
      const socket = await Bun.connect({ hostname: "127.0.0.1", port: gateway.port, socket: { data() {} } });
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"model":`);
      await Bun.sleep(20);
      socket.end();
    }
    await Bun.sleep(200);
    expect((await fetch(`${gateway.url}/api/health`)).status).toBe(200);
    expect(gateway.output()).not.toContain("unhandled error");
  });

  test("bodies being read at once are bounded by max_body_bytes_in_flight, counted as they arrive: past it a 503 that closes the connection, room again once they end", async () => {
    const gateway = await startGateway("[server]\nmax_body_bytes = 200000\nmax_body_bytes_in_flight = 200000\n");
    started.push(gateway);
    const slow = await stalledUploads(gateway.port, 2, 150_000, `{"x":"${"y".repeat(89_990)}`);
    try {
      await Bun.sleep(100);
      const body = JSON.stringify({ model: "none", messages: [{ role: "user", content: "x".repeat(100_000) }] });
      const refused = await fetch(`${gateway.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(refused.headers.get("connection")).toBe("close");
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("service_unavailable");
      // A body of at most 64 KiB is read whole, uncounted, beside the two stalled ones.
      expect(
        (await fetch(`${gateway.url}/v1/chat/completions`, { method: "POST", body: '{"model":"none","messages":[{"role":"user","content":"x"}]}' })).status,
      ).toBe(404);
      for (const socket of slow) socket.end();
      await Bun.sleep(100);
      expect((await fetch(`${gateway.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body })).status).toBe(404);
    } finally {
      for (const socket of slow) socket.end();
    }
  });

  test("a declared length that has not arrived holds none of the budget (regression: 26 idle sockets declaring large bodies refused every chat request)", async () => {
    const gateway = await startGateway("[server]\nmax_body_bytes = 200000\nmax_body_bytes_in_flight = 200000\n");
    started.push(gateway);
    const idle = await stalledUploads(gateway.port, 10, 199_000, "{");
    try {
      await Bun.sleep(100);
      const body = JSON.stringify({ model: "none", messages: [{ role: "user", content: "x".repeat(100_000) }] });
      expect((await fetch(`${gateway.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body })).status).toBe(404);
    } finally {
      for (const socket of idle) socket.end();
    }
  });
});

test("a request with no Host, or one whose Host makes no URL, is answered like any other (regression: 500 and an error log line on every route)", async () => {
  const gateway = await startGateway();
  started.push(gateway);
  const chat = `{"model":"none","messages":[{"role":"user","content":"hi"}]}`;
  // Each: the request line and headers (the connection is closed after the answer), a body, the status.
  const cases: Array<[head: string, body: string, status: number]> = [
    ["GET /api/health HTTP/1.0\r\n", "", 200],
    ["GET /v1/models HTTP/1.1\r\nhost: a b\r\n", "", 200],
    ["GET /v1/models/none HTTP/1.1\r\nhost: x:99999\r\n", "", 404],
    ["GET /nowhere HTTP/1.1\r\nhost: a/b\r\n", "", 404],
    ["GET /dashboard/keys HTTP/1.1\r\nhost: \r\n", "", 303],
    ["GET /auth/me HTTP/1.1\r\nhost: a b\r\n", "", 401],
    [`POST /v1/chat/completions HTTP/1.1\r\nhost: a b\r\ncontent-length: ${chat.length}\r\n`, chat, 404],
    [`POST /v1/chat/completions HTTP/1.1\r\nhost: a b\r\norigin: http://elsewhere.example\r\ncontent-length: ${chat.length}\r\n`, chat, 403],
  ];
  for (const [head, body, status] of cases) {
    const answer = await rawExchange(gateway.port, `${head}connection: close\r\n\r\n${body}`);
    const line = head.split("\r\n")[0];
    expect(`${line} ${answer.split("\r\n")[0]}`).toBe(`${line} HTTP/1.1 ${status} ${STATUS_TEXT[status]}`);
    expect(answer.toLowerCase()).toContain("x-request-id: req_");
  }
  expect(gateway.output()).not.toContain('"level":"error"');
}, 20_000);

const STATUS_TEXT: Record<number, string> = { 200: "OK", 303: "See Other", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found" };

/** Writes `request` as is on a new connection and returns everything read until the server closes it. */
async function rawExchange(port: number, request: string): Promise<string> {
  let text = "";
  const { promise, resolve } = Promise.withResolvers<string>();
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: { data: (_s, chunk) => void (text += chunk.toString()), close: () => resolve(text), error: () => resolve(text) },
  });
  socket.write(request);
  const timer = setTimeout(() => socket.end(), 5_000);
  try {
    return await promise;
  } finally {
    clearTimeout(timer);
  }
}

/** `count` connections each declaring a chat body of `declared` bytes and sending only `sent` of it. */
async function stalledUploads(port: number, count: number, declared: number, sent: string) {
  const sockets = [];
  for (let i = 0; i < count; i++) {
    const socket = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${declared}\r\n\r\n${sent}`);
    sockets.push(socket);
  }
  return sockets;
}

test("with listen on port 0, the setup link has the port the system chose, and opens (regression: it pointed at 8080)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-port0-"));
  writeFileSync(join(dir, "modelgate.toml"), `[server]\nlisten = "127.0.0.1:0"\ndata_dir = "${join(dir, "data")}"\n`);
  const proc = Bun.spawn([BINARY, "serve", "--config", join(dir, "modelgate.toml")], { stdout: "pipe", stderr: "pipe" });
  try {
    let output = "";
    const collect = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) output += new TextDecoder().decode(chunk);
    };
    void collect(proc.stdout);
    void collect(proc.stderr);
    expect(await eventually(() => /listening on http:\/\/127\.0\.0\.1:\d+/.test(output), 10_000)).toBe(true);
    const port = output.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/)![1];
    expect(port).not.toBe("0");
    const link = output.match(/open (http:\/\/\S+\/setup\?token=[a-z2-7]+)/)![1];
    expect(new URL(link).origin).toBe(`http://127.0.0.1:${port}`);
    expect((await fetch(link)).status).toBe(200);
    // Nothing still takes the default's origin for its own (regression: the chat endpoint's page check did).
    const chat = {
      method: "POST",
      headers: { "content-type": "application/json", origin: "http://localhost:8080" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    };
    expect((await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, chat)).status).toBe(403);
  } finally {
    proc.kill();
    await proc.exited;
  }
});

test("the address logged at start is a URL for IPv6 hosts too (regression: http://::1:8080)", () => {
  expect(listenUrl("::1", 8080)).toBe("http://[::1]:8080");
  expect(listenUrl("0.0.0.0", 8080)).toBe("http://0.0.0.0:8080");
  expect(new URL(listenUrl("fd00::7", 9090)).port).toBe("9090");
});

describe("signals and a lost log reader", () => {
  test("a log reader that went away does not stop the API; a hangup reloads, and a stop is the careful way, rows written (regressions: EPIPE killed the server with a stack trace; SIGHUP lost the queued rows)", async () => {
    const mock = startMockUpstream();
    const dir = mkdtempSync(join(tmpdir(), "modelgate-epipe-"));
    const port = freePort();
    writeFileSync(
      join(dir, "modelgate.toml"),
      `[server]\nlisten = "127.0.0.1:${port}"\ndata_dir = "${join(dir, "data")}"\n[[upstreams]]\nname = "mock"\nbase_url = "${mock.url}"\n[[models]]\nid = "m"\nfree = true\ntargets = [{ upstream = "mock" }]\n`,
    );
    const proc = Bun.spawn([BINARY, "serve", "--config", join(dir, "modelgate.toml")], { stdout: "pipe", stderr: "pipe" });
    try {
      // Read the first bytes the server logs, then go away, as `modelgate serve | tee` does when tee dies.
      const reader = proc.stdout.getReader();
      await reader.read();
      await reader.cancel();
      const url = `http://127.0.0.1:${port}`;
      expect(
        await eventually(
          () =>
            fetch(`${url}/api/health`).then(
              (r) => r.ok,
              () => false,
            ),
          10_000,
        ),
      ).toBe(true);
      const chat = () =>
        fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
        });
      for (let i = 0; i < 3; i++) {
        expect((await chat()).status).toBe(200);
        await Bun.sleep(150); // past a flush, whose log lines meet the closed pipe
      }
      expect(proc.exitCode).toBeNull();
      // A closing terminal's hangup reads the config again (its log lines meet the closed pipe too).
      proc.kill("SIGHUP");
      expect(
        await eventually(
          () =>
            fetch(`${url}/api/status`).then(
              async (r) => ((await r.json()) as { config_reloads: number }).config_reloads === 1,
              () => false,
            ),
          10_000,
        ),
      ).toBe(true);
      expect((await chat()).status).toBe(200); // queued, not yet written: the stop must write it
      proc.kill("SIGTERM");
      expect(await proc.exited).toBe(0);
      const db = new Database(join(dir, "data", "modelgate.db"), { readonly: true });
      expect(db.query<{ n: number }, []>("SELECT count(*) AS n FROM request_log").get()!.n).toBe(4);
      db.close();
      expect(await new Response(proc.stderr).text()).not.toContain("EPIPE");
    } finally {
      if (proc.exitCode === null) proc.kill("SIGKILL");
      mock.stop();
    }
  });
});
