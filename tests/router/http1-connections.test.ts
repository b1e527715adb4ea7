/**
 * The HTTP/1.1 client's failures (src/router/http1.ts) against a raw upstream: connections that
 * break off mid-answer, refused and timed-out connects, abort() at every stage, and malformed
 * answers, each with the kind of UpstreamFailure it gives.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { http1Post } from "../../src/router/http1";
import { blackHole } from "../support/black-hole";
import { answer, chunk, cleanUp, expectFailure, failureOf, joined, originFor, post, T, upstream } from "../support/raw-upstream";

afterEach(cleanUp);

describe("connections that break off", () => {
  test(
    "closed in the middle of a Content-Length body: text() rejects as broken",
    async () => {
      const server = upstream(async (req) => {
        await req.conn.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"partial":');
        await req.conn.end();
      });
      const reply = await http1Post(server.origin, "{}").reply;
      expect(reply.status).toBe(200);
      const failure = await expectFailure(reply.text(), "broken");
      expect(failure.message).toContain("in the middle of its answer");
    },
    T,
  );

  test(
    "closed in the middle of a chunked body: the stream errors as broken after the data so far",
    async () => {
      const server = upstream(async (req) => {
        await req.conn.writeSlowly(["HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", chunk("data: 1\n\n"), "8\r\ndata"]);
        await req.conn.end();
      });
      const reply = await http1Post(server.origin, "{}").reply;
      const reader = reply.body().getReader();
      const seen: Uint8Array[] = [];
      const failure = await failureOf(
        (async () => {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) return "ended";
            seen.push(value);
          }
        })(),
      );
      expect(failure.kind).toBe("broken");
      expect(joined(seen)).toBe("data: 1\n\ndata");
    },
    T,
  );

  test(
    "closed before any byte on a fresh connection: reply rejects as broken, with no retry",
    async () => {
      const server = upstream(async (req) => {
        // A retry would reach a second connection and get an answer, so it cannot go unnoticed.
        if (req.conn.index === 0) await req.conn.end();
        else await req.conn.write(answer("retried"));
      });
      const failure = await expectFailure(http1Post(server.origin, "{}").reply, "broken");
      expect(failure.message).toContain("without answering");
      expect(server.conns).toHaveLength(1);
      expect(server.requests).toHaveLength(1);
    },
    T,
  );

  test(
    "reset before any byte on a fresh connection: broken",
    async () => {
      const server = upstream((req) => req.conn.terminate());
      await expectFailure(http1Post(server.origin, "{}").reply, "broken");
      expect(server.conns).toHaveLength(1);
    },
    T,
  );
});

describe("refused and connect timeout", () => {
  test(
    "a port with no listener: refused",
    async () => {
      const gone = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
      const port = gone.port;
      gone.stop(true);
      const failure = await expectFailure(http1Post(originFor(port), "{}").reply, "refused");
      expect(failure.message).toContain('"raw"');
    },
    T,
  );

  test(
    "a connect that does not complete within connectTimeoutMs: connect_timeout",
    async () => {
      const port = await blackHole();
      const started = performance.now();
      const failure = await expectFailure(http1Post(originFor(port, { connectTimeoutMs: 30 }), "{}").reply, "connect_timeout");
      const elapsed = performance.now() - started;
      expect(elapsed).toBeGreaterThanOrEqual(25);
      expect(elapsed).toBeLessThan(500);
      expect(failure.message).toContain("30 ms");
    },
    T,
  );

  test(
    "connectTimeoutMs: 1 settles at once",
    async () => {
      const port = await blackHole();
      const started = performance.now();
      await expectFailure(http1Post(originFor(port, { connectTimeoutMs: 1 }), "{}").reply, "connect_timeout");
      expect(performance.now() - started).toBeLessThan(200);
    },
    T,
  );
});

describe("abort()", () => {
  test(
    "before the answer: reply rejects as aborted and the upstream sees its connection closed",
    async () => {
      const server = upstream(() => {}); // never answers
      const exchange = http1Post(server.origin, "{}");
      await server.until(() => server.requests.length === 1);
      exchange.abort("client went away");
      const failure = await expectFailure(exchange.reply, "aborted");
      expect(failure.message).toBe("client went away");
      await server.conns[0].closed;
    },
    T,
  );

  test(
    "before the connection is even established: aborted, and the origin still works",
    async () => {
      const server = upstream((req) => req.conn.write(answer("ok")));
      const exchange = http1Post(server.origin, "{}");
      exchange.abort("at once");
      await expectFailure(exchange.reply, "aborted");
      expect((await post(server.origin)).text).toBe("ok");
      expect(server.requests).toHaveLength(1); // the aborted request never went out
    },
    T,
  );

  test(
    "in the turn it was made, on a reused connection: the request is never written, the connection closes",
    async () => {
      const server = upstream((req) => req.conn.write(answer(`answer ${req.index}`)));
      expect((await post(server.origin)).text).toBe("answer 0");
      const exchange = http1Post(server.origin, '{"given":"up"}'); // takes the idle connection
      exchange.abort("client went away");
      await expectFailure(exchange.reply, "aborted");
      await server.conns[0].closed;
      expect(server.conns[0].requests).toHaveLength(1);
      expect(server.conns[0].received.toString()).not.toContain("given");
    },
    T,
  );

  test(
    "after the head, in the middle of the body: text() rejects as aborted and the connection closes",
    async () => {
      const server = upstream((req) => req.conn.write('HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n{"half":'));
      const exchange = http1Post(server.origin, "{}");
      const reply = await exchange.reply;
      await server.until(() => server.requests.length === 1);
      const text = reply.text();
      exchange.abort("timeout");
      await expectFailure(text, "aborted");
      await server.conns[0].closed;
    },
    T,
  );

  test(
    "after the answer is complete: a no-op, the connection stays in use",
    async () => {
      const server = upstream((req) => req.conn.write(answer(`answer ${req.index}`)));
      const first = http1Post(server.origin, "{}");
      expect(await (await first.reply).text()).toBe("answer 0");
      const second = http1Post(server.origin, "{}");
      first.abort("late"); // must not touch the connection now carrying the second request
      expect(await (await second.reply).text()).toBe("answer 1");
      expect(server.conns).toHaveLength(1);
      expect(server.conns[0].isClosed).toBe(false);
    },
    T,
  );

  test(
    "cancelling body() mid-way closes the connection; the next request works on a new one",
    async () => {
      const server = upstream(async (req) => {
        if (req.index === 0) await req.conn.write(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${chunk("data: 1\n\n")}`);
        else await req.conn.write(answer("after cancel"));
      });
      const reply = await http1Post(server.origin, "{}").reply;
      const reader = reply.body().getReader();
      const first = await reader.read();
      expect(Buffer.from(first.value!).toString()).toBe("data: 1\n\n");
      await reader.cancel();
      await server.conns[0].closed;
      expect((await post(server.origin)).text).toBe("after cancel");
      expect(server.conns).toHaveLength(2);
    },
    T,
  );
});

describe("malformed answers", () => {
  async function expectBrokenThenFresh(bad: string, where: "reply" | "text"): Promise<void> {
    const server = upstream((req) => req.conn.write(req.index === 0 ? bad : answer("fine")));
    const exchange = http1Post(server.origin, "{}");
    if (where === "reply") {
      await expectFailure(exchange.reply, "broken");
    } else {
      await expectFailure((await exchange.reply).text(), "broken");
    }
    await server.conns[0].closed;
    expect((await post(server.origin)).text).toBe("fine");
    expect(server.conns).toHaveLength(2);
  }

  test(
    "not an HTTP status line",
    async () => {
      await expectBrokenThenFresh("SSH-2.0-OpenSSH_9.6\r\n\r\n", "reply");
    },
    T,
  );

  test(
    "an invalid Content-Length (12, 13)",
    async () => {
      await expectBrokenThenFresh('HTTP/1.1 200 OK\r\ncontent-length: 12, 13\r\n\r\n{"a":"bcdef"}', "reply");
    },
    T,
  );

  test(
    "an invalid chunk size (zz)",
    async () => {
      await expectBrokenThenFresh("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", "text");
    },
    T,
  );

  test(
    "chunk data longer than its size",
    async () => {
      await expectBrokenThenFresh("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n", "text");
    },
    T,
  );
});
