/**
 * The HTTP/1.1 client (src/router/http1*.ts) under load and odd requests, on raw loopback
 * sockets: a burst far past the per-upstream connection cap, a request head that is not ASCII,
 * and a host name that does not resolve.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { http1Post } from "../../src/router/http1";
import { answer, cleanUp, expectFailure, originFor, post, T, upstream } from "../support/raw-upstream";

afterEach(cleanUp);

describe("max connections", () => {
  test(
    "1,000 requests at once against a cap of 8: never more than 8 sockets, every request answered, its own answer",
    async () => {
      const server = upstream((req) => req.conn.write(answer(`echo ${req.body.toString()}`)));
      const origin = originFor(server.port, { maxConnections: 8 });
      const texts = await Promise.all(Array.from({ length: 1000 }, (_, n) => post(origin, `{"n":${n}}`).then((r) => r.text)));
      expect(texts).toEqual(Array.from({ length: 1000 }, (_, n) => `echo {"n":${n}}`));
      expect(server.conns.length).toBeLessThanOrEqual(8); // every socket the upstream ever accepted
      expect(server.conns.every((c) => !c.isClosed)).toBe(true);
    },
    T,
  );

  test(
    "requests waiting for a connection go in the order they came; one given up while waiting is never sent",
    async () => {
      const server = upstream((req) => {
        if (req.index > 0) return req.conn.write(answer(`echo ${req.body.toString()}`));
      });
      const origin = originFor(server.port, { maxConnections: 1 });
      const hung = http1Post(origin, '{"n":"hung"}');
      await server.until(() => server.requests.length === 1);
      const waiting = [0, 1, 2].map((n) => http1Post(origin, `{"n":${n}}`));
      waiting[1].abort("client went away");
      await expectFailure(waiting[1].reply, "aborted");
      hung.abort("first-byte timeout"); // its connection closes; its place opens one for the first waiting
      await expectFailure(hung.reply, "aborted");
      expect(await (await waiting[0].reply).text()).toBe('echo {"n":0}');
      expect(await (await waiting[2].reply).text()).toBe('echo {"n":2}');
      expect(server.requests.map((r) => r.body.toString())).toEqual(['{"n":"hung"}', '{"n":0}', '{"n":2}']);
      expect(server.conns.filter((c) => !c.isClosed)).toHaveLength(1);
    },
    T,
  );

  test(
    "a connect that fails gives its place to the next waiting request",
    async () => {
      const gone = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
      const origin = originFor(gone.port, { maxConnections: 1 });
      gone.stop(true);
      const results = await Promise.allSettled([0, 1, 2].map(() => http1Post(origin, "{}").reply));
      expect(results.map((r) => r.status)).toEqual(["rejected", "rejected", "rejected"]);
    },
    T,
  );
});

describe("the request", () => {
  test("a non-ASCII api_key: the request's length is counted in bytes, so it goes out whole", async () => {
    // Large enough that the first socket write takes only part of it: the rest must start at the
    // right byte. Three bytes a character in UTF-8.
    const key = "€".repeat(1_500_000);
    const server = upstream((req) => req.conn.write(answer(`got ${req.body.length} bytes`)));
    const origin = originFor(server.port);
    origin.requestHead += `authorization: Bearer ${key}\r\n`;
    const body = JSON.stringify({ messages: [{ role: "user", content: "héllo" }] });
    expect((await post(origin, body)).text).toBe(`got ${Buffer.byteLength(body)} bytes`);
    const wire = Buffer.from(`${origin.requestHead}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    // Compared as booleans: a failure must not print megabytes.
    expect(server.conns[0].received.length === wire.length).toBe(true);
    expect(server.conns[0].received.equals(wire)).toBe(true);
  }, 10_000);

  test("a host name that does not resolve is said so, not 'connection refused'", async () => {
    const failure = await expectFailure(http1Post(originFor(80, { hostname: "no-such-host.invalid" }), "{}").reply, "unresolved");
    expect(failure.message).toBe('upstream "raw" is unreachable (its host name did not resolve)');
  }, 10_000);
});
