/**
 * The HTTP/1.1 client (src/router/http1*.ts) against upstreams that break the protocol, on raw
 * loopback sockets that write exact bytes: answers nobody asked for, framing that leaves the body's
 * end in doubt, heads and statuses that would make the client wait for ever, and a close long
 * into a generation that must not be sent again. The cap on connections, the request's size in
 * bytes and a host name that does not resolve are in ./hostile-requests.test.ts.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { http1Post } from "../../src/router/http1";
import { RESEND_WINDOW_MS } from "../../src/router/http1-resend";
import { answer, cleanUp, expectFailure, originFor, post, T, upstream } from "../support/raw-upstream";

afterEach(cleanUp);

/** An answer that echoes the request body, so whoever reads it can tell whose answer it is. */
function echo(body: Buffer | string): string {
  return answer(`echo ${body.toString()}`);
}

describe("answers nobody asked for", () => {
  test(
    "an extra answer that arrives while the connection is idle, as the next request takes it: discarded, never that request's answer",
    async () => {
      const server = upstream((req) => req.conn.write(echo(req.body)));
      expect((await post(server.origin, '{"n":0}')).text).toBe('echo {"n":0}');
      // Written in the same turn as the next request takes the idle connection: the gateway has not
      // read it yet when that request is made.
      server.conns[0].socket.write(answer("an answer for nobody"));
      expect((await post(server.origin, '{"n":1}')).text).toBe('echo {"n":1}');
      expect((await post(server.origin, '{"n":2}')).text).toBe('echo {"n":2}');
      await server.conns[0].closed;
      expect(server.conns[0].requests.map((r) => r.body.toString())).toEqual(['{"n":0}']); // the second never went out on it
      expect(server.requests.map((r) => r.body.toString())).toEqual(['{"n":0}', '{"n":1}', '{"n":2}']);
    },
    T,
  );

  test(
    "an extra answer that arrives as the connection passes straight to a waiting request: discarded, never that request's answer",
    async () => {
      const server = upstream((req) => req.conn.write(echo(req.body)));
      const origin = originFor(server.port, { maxConnections: 1 });
      const first = http1Post(origin, '{"n":0}');
      const second = http1Post(origin, '{"n":1}'); // waits for the one connection
      const reply = await first.reply;
      // The first answer is complete and its connection now carries the second request, not yet written.
      server.conns[0].socket.write(answer("a second answer to the first request"));
      expect(await reply.text()).toBe('echo {"n":0}');
      expect(await (await second.reply).text()).toBe('echo {"n":1}');
      expect(server.conns[0].requests).toHaveLength(1);
    },
    T,
  );

  test(
    "two answers in one read on a reused connection: neither is relayed, and no connection to that upstream is reused for a while",
    async () => {
      const server = upstream((req) => {
        if (req.index === 1) return req.conn.write(answer("sent before the request arrived") + echo(req.body));
        return req.conn.write(echo(req.body));
      });
      expect((await post(server.origin, '{"n":0}')).text).toBe('echo {"n":0}');
      const reply = await http1Post(server.origin, '{"n":1}').reply;
      const failure = await expectFailure(reply.text(), "broken");
      expect(failure.message).toBe('upstream "raw" sent an invalid answer: more than one answer to one request');
      expect((await post(server.origin, '{"n":2}')).text).toBe('echo {"n":2}');
      expect((await post(server.origin, '{"n":3}')).text).toBe('echo {"n":3}');
      expect(server.conns.map((c) => c.requests.length)).toEqual([2, 1, 1]);
    },
    T,
  );

  test(
    "many clients over a few connections, extra answers after some of the answers: every client reads its own",
    async () => {
      const server = upstream(async (req) => {
        await req.conn.write(echo(req.body));
        if (req.index % 3 === 0) await req.conn.write(answer(`stray after ${req.body.toString()}`));
      });
      const origin = originFor(server.port, { maxConnections: 4 });
      const texts = await Promise.all(Array.from({ length: 60 }, (_, n) => post(origin, `{"client":${n}}`).then((r) => r.text)));
      expect(texts).toEqual(Array.from({ length: 60 }, (_, n) => `echo {"client":${n}}`));
    },
    T,
  );
});

describe("framing that leaves the body's end in doubt, or no end at all", () => {
  async function expectRefused(bad: string, why: string): Promise<void> {
    const server = upstream((req) => req.conn.write(req.index === 0 ? bad : answer("fine")));
    const failure = await expectFailure(http1Post(server.origin, "{}").reply, "broken");
    expect(failure.message).toBe(`upstream "raw" sent an invalid answer: ${why}`);
    await server.conns[0].closed;
    expect((await post(server.origin)).text).toBe("fine");
    expect(server.conns).toHaveLength(2);
  }

  test(
    "Transfer-Encoding and Content-Length together (RFC 9112 §6.3): refused, the bytes after either end never read as an answer",
    async () => {
      const smuggled = answer('{"smuggled":true}');
      await expectRefused(
        `HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
        "both Transfer-Encoding and Content-Length",
      );
    },
    T,
  );

  test(
    "Transfer-Encoding in an HTTP/1.0 answer: refused",
    async () => {
      await expectRefused("HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "Transfer-Encoding in an HTTP/1.0 answer");
    },
    T,
  );

  // 100 KiB arrives whole in one read; 1 MiB, written at once, is read in pieces.
  for (const kib of [100, 1024]) {
    test(
      `a ${kib} KiB head written at once: refused as too large`,
      async () => {
        await expectRefused(`HTTP/1.1 200 OK\r\nx-pad: ${"a".repeat(kib * 1024)}\r\ncontent-length: 2\r\n\r\n{}`, "the response head is too large");
      },
      T,
    );
  }

  test(
    "status 101: an upstream error, not an interim answer to wait past",
    async () => {
      await expectRefused(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
        "101 Switching Protocols, though no upgrade was asked for",
      );
    },
    T,
  );

  test(
    "status 000: an upstream error, not an interim answer to wait past",
    async () => {
      await expectRefused("HTTP/1.1 000 Nothing\r\ncontent-length: 0\r\n\r\n", "invalid status 000");
    },
    T,
  );

  test(
    "100 and 103 stay interim: the answer after them is the answer",
    async () => {
      const server = upstream((req) => req.conn.write(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n${answer("after interim")}`));
      expect((await post(server.origin)).text).toBe("after interim");
    },
    T,
  );
});

describe("a request is sent again only when the upstream cannot have acted on it", () => {
  test(
    "a pooled connection closed long after its request went out (a crash into a generation): broken, never a second generation",
    async () => {
      const server = upstream(async (req) => {
        if (req.index === 0) return req.conn.write(answer("answer 0"));
        if (req.index === 1) {
          await Bun.sleep(RESEND_WINDOW_MS + 150); // generating
          return req.conn.end();
        }
        await req.conn.write(answer("a second generation"));
      });
      expect((await post(server.origin)).text).toBe("answer 0");
      const failure = await expectFailure(http1Post(server.origin, '{"long":"generation"}').reply, "broken");
      expect(failure.message).toBe('upstream "raw" closed the connection without answering');
      expect(server.requests).toHaveLength(2);
      expect(server.conns).toHaveLength(1);
    },
    T,
  );

  test(
    "a pooled connection the upstream closed before the request went out: sent on a new connection",
    async () => {
      const server = upstream((req) => req.conn.write(echo(req.body)));
      expect((await post(server.origin, '{"n":0}')).text).toBe('echo {"n":0}');
      server.conns[0].socket.end(); // the upstream's idle close, read only after the next request takes the connection
      expect((await post(server.origin, '{"n":1}')).text).toBe('echo {"n":1}');
      expect(server.conns[0].requests).toHaveLength(1);
      expect(server.conns[1].requests.map((r) => r.body.toString())).toEqual(['{"n":1}']);
    },
    T,
  );
});
