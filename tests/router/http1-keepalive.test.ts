/**
 * The HTTP/1.1 client's connection reuse (src/router/http1.ts) against a raw upstream: when a
 * connection is kept and reused, when it is not, and the single resend of a request whose reused
 * connection closed before answering.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { http1Post } from "../../src/router/http1";
import { answer, cleanUp, expectFailure, originFor, post, T, upstream } from "../support/raw-upstream";

afterEach(cleanUp);

/** What some servers send on an idle keep-alive connection they time out. */
const TIMED_OUT = answer("", "connection: close\r\n", "408 Request Timeout");

describe("keep-alive", () => {
  test(
    "two sequential requests share one connection",
    async () => {
      const server = upstream((req) => req.conn.write(answer(`answer ${req.index}`)));
      expect((await post(server.origin, '{"n":0}')).text).toBe("answer 0");
      expect((await post(server.origin, '{"n":1}')).text).toBe("answer 1");
      expect(server.conns).toHaveLength(1);
      expect(server.conns[0].requests.map((r) => r.body.toString())).toEqual(['{"n":0}', '{"n":1}']);
    },
    T,
  );

  test(
    "requests made in one turn are written together, each once, on its own idle connection",
    async () => {
      const server = upstream((req) => req.conn.write(answer(`echo ${req.body.toString()}`)));
      await Promise.all([0, 1, 2].map((n) => post(server.origin, `{"warm":${n}}`)));
      expect(server.conns).toHaveLength(3);
      const texts = await Promise.all([0, 1, 2].map(async (n) => await (await http1Post(server.origin, `{"n":${n}}`).reply).text()));
      expect(texts).toEqual(['echo {"n":0}', 'echo {"n":1}', 'echo {"n":2}']);
      expect(server.conns).toHaveLength(3);
      expect(server.conns.map((c) => c.requests.length)).toEqual([2, 2, 2]);
    },
    T,
  );

  test(
    "connections are kept per origin: another origin object opens its own",
    async () => {
      const server = upstream((req) => req.conn.write(answer("x")));
      await post(server.origin);
      await post(originFor(server.port));
      expect(server.conns).toHaveLength(2);
    },
    T,
  );

  test(
    "an answer with connection: close makes the next request open a new connection",
    async () => {
      const server = upstream((req) => req.conn.write(answer(`answer ${req.index}`, req.index === 0 ? "connection: close\r\n" : "")));
      expect((await post(server.origin)).text).toBe("answer 0");
      await server.conns[0].closed; // the client closed it itself
      expect((await post(server.origin)).text).toBe("answer 1");
      expect(server.conns).toHaveLength(2);
      expect(server.conns[1].requests).toHaveLength(1);
    },
    T,
  );

  test(
    "an HTTP/1.0 answer without keep-alive is not reused",
    async () => {
      const server = upstream((req) => req.conn.write(answer(`answer ${req.index}`, "", "200 OK", req.index === 0 ? "1.0" : "1.1")));
      expect((await post(server.origin)).text).toBe("answer 0");
      expect((await post(server.origin)).text).toBe("answer 1");
      expect(server.conns).toHaveLength(2);
    },
    T,
  );

  test(
    "an HTTP/1.0 answer with connection: keep-alive is reused",
    async () => {
      const server = upstream((req) => req.conn.write(answer(`answer ${req.index}`, "connection: Keep-Alive\r\n", "200 OK", "1.0")));
      await post(server.origin);
      await post(server.origin);
      expect(server.conns).toHaveLength(1);
    },
    T,
  );

  test(
    "bytes after a complete answer: the answer is cut at its length and the connection not reused",
    async () => {
      const server = upstream((req) => req.conn.write(req.index === 0 ? `${answer("abc")}HTTP/1.1 200 OK\r\n` : answer("fresh")));
      expect((await post(server.origin)).text).toBe("abc");
      expect((await post(server.origin)).text).toBe("fresh");
      expect(server.conns).toHaveLength(2);
    },
    T,
  );

  test("an idle connection is closed by the client after 4 s, before the 5 s keep-alive of common servers", async () => {
    const server = upstream((req) => req.conn.write(answer(`answer ${req.index}`)));
    expect((await post(server.origin)).text).toBe("answer 0");
    const idleSince = performance.now();
    await Bun.sleep(3_000);
    expect(server.conns[0].isClosed).toBe(false);
    await server.conns[0].closed;
    expect(performance.now() - idleSince).toBeLessThan(5_000);
    expect((await post(server.origin)).text).toBe("answer 1");
    expect(server.conns).toHaveLength(2);
  }, 6_000);

  test(
    "bytes arriving on an idle connection close it; the next request opens a new one",
    async () => {
      const server = upstream((req) => req.conn.write(answer(`answer ${req.index}`)));
      expect((await post(server.origin)).text).toBe("answer 0");
      await server.conns[0].write("HTTP/1.1 200 OK\r\n");
      await server.conns[0].closed;
      expect((await post(server.origin)).text).toBe("answer 1");
      expect(server.conns).toHaveLength(2);
    },
    T,
  );

  test(
    "a 408 on a reused connection (the upstream timed it out as the request came): sent once more on a new one",
    async () => {
      const server = upstream((req) => {
        if (req.conn.index === 0 && req.conn.requests.length > 1) return; // timed out: never answers here
        return req.conn.write(answer(`echo ${req.body.toString()}`));
      });
      expect((await post(server.origin, '{"n":0}')).text).toBe('echo {"n":0}');
      server.conns[0].socket.write(TIMED_OUT);
      const exchange = http1Post(server.origin, '{"n":1}'); // takes the idle connection before the 408 is read
      expect(await (await exchange.reply).text()).toBe('echo {"n":1}');
      expect(server.conns).toHaveLength(2);
      expect(server.conns[1].requests.map((r) => r.body.toString())).toEqual(['{"n":1}']);
      await server.conns[0].closed;
    },
    T,
  );

  test(
    "a 408 on a new connection is the answer: passed on, not sent again",
    async () => {
      const server = upstream((req) => req.conn.write(TIMED_OUT));
      expect((await post(server.origin)).reply.status).toBe(408);
      expect(server.requests).toHaveLength(1);
    },
    T,
  );

  test(
    "a complete keep-alive answer that arrives while the request body is still being sent",
    async () => {
      // The upstream refuses a large body as soon as it has read the head, keeps the connection and
      // reads (and drops) the rest of the body, as RFC 9112 lets it. The client must finish sending
      // the first body before the connection carries a second request.
      const server = upstream((req) => {
        if (req.body.toString() === '{"n":2}') return req.conn.write(answer("second"));
      });
      let refused = false;
      server.onHead = (conn) => {
        if (refused) return;
        refused = true;
        void conn.write(answer('{"error":"too large"}', "", "413 Payload Too Large"));
      };
      const big = JSON.stringify({ text: "x".repeat(8_000_000) }); // more than the socket buffers take at once
      const wire = (body: string): Buffer => Buffer.from(`${server.origin.requestHead}content-length: ${body.length}\r\n\r\n${body}`);
      const [wire1, wire2] = [wire(big), wire('{"n":2}')];
      const first = await post(server.origin, big);
      expect(first.reply.status).toBe(413);
      const second = http1Post(server.origin, '{"n":2}');
      second.reply.catch(() => {}); // if this test fails, the cleanup must not leak a rejection into the next
      const bytes = (): number => server.conns.reduce((sum, c) => sum + c.received.length, 0);
      await server.until(() => bytes() >= wire1.length + wire2.length || (server.conns.length === 2 && server.conns[1].received.length >= wire2.length));
      if (server.conns.length === 1) {
        // Reused: the second request must start where the first body ends, not inside it.
        expect(server.conns[0].received.indexOf(wire2)).toBe(wire1.length);
        expect(server.conns[0].received.equals(Buffer.concat([wire1, wire2]))).toBe(true);
      } else {
        // Or not reused: the second request goes alone on a new connection.
        expect(server.conns[0].received.indexOf(wire2)).toBe(-1);
        expect(server.conns[1].received.equals(wire2)).toBe(true);
      }
      expect(await (await second.reply).text()).toBe("second");
    },
    T,
  );

  test(
    "a stale idle connection the upstream closed right after its answer: the next request still succeeds",
    async () => {
      const server = upstream(async (req) => {
        await req.conn.write(answer(`answer ${req.index}`));
        if (req.index === 0) await req.conn.end();
      });
      expect((await post(server.origin)).text).toBe("answer 0");
      await server.conns[0].closed;
      expect((await post(server.origin)).text).toBe("answer 1");
      expect(server.conns).toHaveLength(2);
      expect(server.requests).toHaveLength(2);
    },
    T,
  );

  test(
    "a reused connection closed (FIN) before any byte of the answer: sent once more on a new connection",
    async () => {
      // The race the retry exists for: the upstream's idle close crosses the request on the wire.
      const server = upstream(async (req) => {
        if (req.index === 1) return req.conn.end(); // the second request, on the reused connection
        await req.conn.write(answer(`answer ${req.index}`));
      });
      expect((await post(server.origin)).text).toBe("answer 0");
      expect((await post(server.origin, '{"n":"second"}')).text).toBe("answer 2");
      expect(server.conns).toHaveLength(2);
      expect(server.conns[0].requests).toHaveLength(2);
      expect(server.conns[1].requests).toHaveLength(1);
      expect(server.conns[1].requests[0].raw.equals(server.conns[0].requests[1].raw)).toBe(true);
    },
    T,
  );

  test(
    "a reused connection reset (RST) before any byte of the answer: sent once more on a new connection",
    async () => {
      // A server that closes an idle connection with SO_LINGER 0 (or with unread bytes) resets it.
      const server = upstream(async (req) => {
        if (req.index === 1) return req.conn.terminate();
        await req.conn.write(answer(`answer ${req.index}`));
      });
      expect((await post(server.origin)).text).toBe("answer 0");
      expect((await post(server.origin)).text).toBe("answer 2");
      expect(server.conns).toHaveLength(2);
    },
    T,
  );

  test(
    "the request is sent once more, not twice: if the new connection closes too, it is broken",
    async () => {
      const server = upstream(async (req) => {
        if (req.index === 0) await req.conn.write(answer("answer 0"));
        else await req.conn.end();
      });
      await post(server.origin);
      const failure = await expectFailure(http1Post(server.origin, "{}").reply, "broken");
      expect(failure.message).toContain("without answering");
      expect(server.conns).toHaveLength(2);
      expect(server.requests).toHaveLength(3);
    },
    T,
  );

  test(
    "a reused connection closed after part of the answer: broken, and not sent again",
    async () => {
      const server = upstream(async (req) => {
        if (req.index === 0) return req.conn.write(answer("answer 0"));
        if (req.index === 1) {
          await req.conn.write("HTTP/1.1 200");
          return req.conn.end();
        }
        await req.conn.write(answer("a retry that must not happen"));
      });
      await post(server.origin);
      await expectFailure(http1Post(server.origin, "{}").reply, "broken");
      expect(server.conns).toHaveLength(1);
      expect(server.requests).toHaveLength(2);
    },
    T,
  );
});
