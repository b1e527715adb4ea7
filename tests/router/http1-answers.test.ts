/**
 * The HTTP/1.1 client (src/router/http1.ts) against a raw upstream: the request bytes on the wire,
 * and answers framed by Content-Length, chunked encoding or the end of the connection, interim
 * 1xx answers, and large bodies streamed with backpressure.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { http1Post } from "../../src/router/http1";
import { answer, chunk, cleanUp, expectFailure, joined, post, readPieces, T, upstream } from "../support/raw-upstream";
import { MAX_ANSWER_BYTES } from "../../src/router/exchange";
import { fetchPost } from "../../src/router/fetch-exchange";

afterEach(cleanUp);

describe("the request on the wire", () => {
  test(
    "head, content-length in UTF-8 bytes, a blank line, then the body exactly",
    async () => {
      const server = upstream((req) => req.conn.write(answer("{}")));
      const body = '{"content":"héllo ✓"}';
      const { reply } = await post(server.origin, body);
      expect(reply.status).toBe(200);
      expect(server.requests).toHaveLength(1);
      const expected = Buffer.concat([
        Buffer.from(`${server.origin.requestHead}content-length: ${Buffer.byteLength(body)}\r\n\r\n`, "latin1"),
        Buffer.from(body, "utf8"),
      ]);
      expect(Buffer.byteLength(body)).toBe(body.length + 3); // é is 2 bytes, ✓ is 3
      expect(server.requests[0].raw.equals(expected)).toBe(true);
      expect(server.conns[0].received.equals(expected)).toBe(true); // nothing else was sent
    },
    T,
  );

  test(
    "a body larger than one socket write arrives whole (the rest goes out on drain)",
    async () => {
      const server = upstream((req) => req.conn.write(answer(String(req.body.length))));
      const body = JSON.stringify({ text: "ü✓".repeat(1_000_000) }); // ~5 MB in UTF-8
      const { text } = await post(server.origin, body);
      expect(text).toBe(String(Buffer.byteLength(body)));
      expect(server.requests[0].body.equals(Buffer.from(body))).toBe(true);
    },
    T,
  );
});

describe("Content-Length answers", () => {
  test(
    "head and body in one packet",
    async () => {
      const json = '{"id":"x","choices":[]}';
      const server = upstream((req) => req.conn.write(answer(json, "x-request-id: abc\r\n", "201 Created")));
      const { reply, text } = await post(server.origin);
      expect(reply.status).toBe(201);
      expect(reply.header("x-request-id")).toBe("abc");
      expect(reply.header("content-type")).toBe("application/json");
      expect(reply.header("content-length")).toBe(String(json.length));
      expect(reply.header("x-missing")).toBeNull();
      expect(text).toBe(json);
    },
    T,
  );

  test(
    "a head split inside a header name and inside CRLFCRLF, the body in writes splitting UTF-8",
    async () => {
      const json = '{"content":"héllo ✓ wörld"}';
      const bytes = Buffer.from(json);
      const check = bytes.indexOf(Buffer.from("✓"));
      const server = upstream((req) =>
        req.conn.writeSlowly([
          "HTTP/1.1 200 OK\r\ncontent-ty",
          `pe: application/json\r\ncontent-length: ${bytes.length}\r\n\r`,
          "\n",
          bytes.subarray(0, 14), // ends inside "é"
          bytes.subarray(14, check + 1), // ends after the first byte of "✓"
          bytes.subarray(check + 1, check + 2),
          bytes.subarray(check + 2),
        ]),
      );
      expect(bytes.subarray(13, 15).toString()).toBe("é");
      const { reply, text } = await post(server.origin);
      expect(reply.status).toBe(200);
      expect(reply.header("content-type")).toBe("application/json");
      expect(text).toBe(json);
    },
    T,
  );

  test(
    "a status line arriving one byte at a time",
    async () => {
      const head = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n";
      const server = upstream((req) => req.conn.writeSlowly([...head.split(""), "ok"]));
      const { reply, text } = await post(server.origin);
      expect(reply.status).toBe(200);
      expect(text).toBe("ok");
    },
    T,
  );

  test(
    "text() of an answer that arrived whole, and body() of one still arriving",
    async () => {
      const server = upstream((req) => req.conn.write(answer("first")));
      const first = await http1Post(server.origin, "{}").reply;
      expect(await first.text()).toBe("first");
      server.handler = (req) => req.conn.writeSlowly(["HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsec", "ond"]);
      const second = await http1Post(server.origin, "{}").reply;
      expect(joined(await readPieces(second.body()))).toBe("second");
    },
    T,
  );

  test(
    "an empty body: content-length 0 and 204 both end at once and keep the connection",
    async () => {
      const server = upstream((req) => req.conn.write(req.index === 0 ? "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n" : "HTTP/1.1 204 No Content\r\n\r\n"));
      expect((await post(server.origin)).text).toBe("");
      const second = await post(server.origin);
      expect(second.reply.status).toBe(204);
      expect(second.text).toBe("");
      expect(server.conns).toHaveLength(1);
    },
    T,
  );
});

describe("chunked answers", () => {
  const head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
  const sixteen = "0123456789abcdef";
  const twentySix = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  const parts = [
    head,
    "5;foo=bar\r\nhello\r\n", // a chunk extension
    "1",
    "0\r\n", // "10" split mid size line
    `${sixteen}\r\n1A\r\n${twentySix}\r\n`, // upper-case hex
    "1a\r", // lower-case hex, split inside CRLF
    `\n${twentySix.toLowerCase()}\r\n`,
    `${Buffer.byteLength("✓é").toString(16)}\r\n✓é\r\n`,
    "0\r\nx-trailer: yes\r\n",
    "x-other: 1\r\n\r\n", // a trailer section
  ];
  const expected = `hello${sixteen}${twentySix}${twentySix.toLowerCase()}✓é`;

  test(
    "body() yields exactly the data bytes, in order",
    async () => {
      const server = upstream((req) => req.conn.writeSlowly(parts));
      const reply = await http1Post(server.origin, "{}").reply;
      expect(reply.status).toBe(200);
      expect(reply.header("transfer-encoding")).toBe("chunked");
      const pieces = await readPieces(reply.body());
      expect(pieces.length).toBeGreaterThan(1);
      expect(joined(pieces)).toBe(expected);
      // The trailer was consumed as part of the answer: the connection carries the next request.
      server.handler = (req) => req.conn.write(answer("again"));
      expect((await post(server.origin)).text).toBe("again");
      expect(server.conns).toHaveLength(1);
    },
    T,
  );

  test(
    "text() joins the chunks",
    async () => {
      const server = upstream((req) => req.conn.writeSlowly(parts));
      expect((await post(server.origin)).text).toBe(expected);
    },
    T,
  );

  test(
    "a whole chunked answer in one packet",
    async () => {
      const server = upstream((req) => req.conn.write(parts.join("")));
      expect((await post(server.origin)).text).toBe(expected);
    },
    T,
  );
});

describe("answers past MAX_ANSWER_BYTES (regression: an endless body grew the gateway's memory until the idle timeout)", () => {
  const MIB = "x".repeat(1024 * 1024);

  test("a chunked body that never ends fails too_large and closes the connection", async () => {
    const server = upstream(async (req) => {
      await req.conn.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n");
      while (!req.conn.isClosed) await req.conn.write(chunk(MIB));
    });
    const reply = await http1Post(server.origin, "{}").reply;
    const failure = await expectFailure(reply.text(), "too_large");
    expect(failure.message).toBe(`upstream "raw" answered more than ${MAX_ANSWER_BYTES / 1024 / 1024} MiB`);
    await server.conns[0].closed;
  }, 10_000);

  test("through fetch (https upstreams) too", async () => {
    const endless = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () => new Response(new ReadableStream({ pull: (controller) => controller.enqueue(new TextEncoder().encode(MIB)) })),
    });
    try {
      const reply = await fetchPost("far", `http://127.0.0.1:${endless.port}/v1/chat/completions`, {}, "{}").reply;
      expect((await expectFailure(reply.text(), "too_large")).message).toContain('upstream "far" answered more than');
    } finally {
      endless.stop(true);
    }
  }, 10_000);
});

describe("answers framed by the end of the connection", () => {
  test(
    "no Content-Length nor Transfer-Encoding: the body ends when the upstream closes",
    async () => {
      const server = upstream(async (req) => {
        if (req.index === 0) {
          await req.conn.writeSlowly(["HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil ", "the ", "end ✓"]);
          await req.conn.end();
        } else {
          await req.conn.write(answer("next"));
        }
      });
      const reply = await http1Post(server.origin, "{}").reply;
      expect(reply.header("content-length")).toBeNull();
      expect(await reply.text()).toBe("until the end ✓");
      expect((await post(server.origin)).text).toBe("next");
      expect(server.conns).toHaveLength(2);
    },
    T,
  );

  test(
    "a reset instead of an orderly close cuts the body short: a failure, not a whole answer (regression: relayed as complete)",
    async () => {
      const server = upstream(async (req) => {
        await req.conn.writeSlowly(["HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n", '{"choices":[{"message":{"content":"This answer is cut']);
        await Bun.sleep(20);
        req.conn.terminate();
      });
      const reply = await http1Post(server.origin, "{}").reply;
      await expectFailure(reply.text(), "broken");
    },
    T,
  );

  test(
    "transfer-encoding other than chunked is read until close and streams",
    async () => {
      const server = upstream(async (req) => {
        await req.conn.writeSlowly(["HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\nab", "cd"]);
        await req.conn.end();
      });
      const reply = await http1Post(server.origin, "{}").reply;
      expect(joined(await readPieces(reply.body()))).toBe("abcd");
    },
    T,
  );
});

describe("interim answers", () => {
  test(
    "100 Continue and 103 Early Hints before the 200 are skipped (one packet)",
    async () => {
      const server = upstream((req) =>
        req.conn.write(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>; rel=preload\r\n\r\n${answer("final")}`),
      );
      const { reply, text } = await post(server.origin);
      expect(reply.status).toBe(200);
      expect(reply.header("link")).toBeNull();
      expect(text).toBe("final");
    },
    T,
  );

  test(
    "interim answers in their own packets, split anywhere",
    async () => {
      const server = upstream((req) =>
        req.conn.writeSlowly(["HTTP/1.1 100 Cont", "inue\r\n\r\n", "HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 2", answer("final").slice(10)]),
      );
      const { reply, text } = await post(server.origin);
      expect(reply.status).toBe(200);
      expect(text).toBe("final");
      // The skipped answers left nothing behind: the connection is reused.
      server.handler = (req) => req.conn.write(answer("reused"));
      expect((await post(server.origin)).text).toBe("reused");
      expect(server.conns).toHaveLength(1);
    },
    T,
  );
});

describe("streamed bodies", () => {
  test(
    "200 small chunks written as fast as possible, read slowly, arrive complete and in order",
    async () => {
      const chunks = Array.from({ length: 200 }, (_, i) => `data: {"n":${i},"t":"${"é✓".repeat(i % 7)}"}\n\n`);
      const server = upstream(async (req) => {
        await req.conn.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n");
        await Promise.all([...chunks.map((c) => req.conn.write(chunk(c))), req.conn.write("0\r\n\r\n")]);
      });
      const reply = await http1Post(server.origin, "{}").reply;
      const pieces = await readPieces(reply.body(), () => Bun.sleep(0));
      expect(joined(pieces)).toBe(chunks.join(""));
    },
    T,
  );

  test(
    "a reader that stops holds the upstream back; every handed-out buffer keeps its bytes",
    async () => {
      // 10 MB in 640 distinct chunks: more than the stream's high-water mark and the loopback socket
      // buffers (~4 MB), so the client must pause the socket while the reader waits and resume it
      // when the reader reads again. Each piece is checked only at the very end, after every later
      // socket read, so a read buffer reused under a queued piece would show.
      const chunks = Array.from({ length: 640 }, (_, i) => `${String(i).padStart(4, "0")}:${String.fromCharCode(65 + (i % 26)).repeat(16_000)}\n`);
      const server = upstream(async (req) => {
        await req.conn.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
        await Promise.all([...chunks.map((c) => req.conn.write(chunk(c))), req.conn.write("0\r\n\r\n")]);
      });
      const reply = await http1Post(server.origin, "{}").reply;
      const reader = reply.body().getReader();
      const pieces: Uint8Array[] = [(await reader.read()).value!];
      // No event marks "the client stopped reading", so give an unpaused client ample time to drain
      // everything (it reads GB/s over loopback): the upstream must still have bytes it cannot send.
      await Bun.sleep(50);
      expect(server.conns[0].unflushed).toBeGreaterThan(1_000_000);
      let reads = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        pieces.push(value);
        if (++reads % 16 === 0) await Bun.sleep(0);
      }
      expect(server.conns[0].unflushed).toBe(0);
      expect(joined(pieces)).toBe(chunks.join(""));
    },
    T,
  );

  test(
    "a Content-Length body streamed in many writes keeps every byte",
    async () => {
      const text = Array.from({ length: 300 }, (_, i) => `line ${i} ✓\n`).join("");
      const bytes = Buffer.from(text);
      const server = upstream(async (req) => {
        await req.conn.write(`HTTP/1.1 200 OK\r\ncontent-length: ${bytes.length}\r\n\r\n`);
        const writes: Promise<void>[] = [];
        for (let at = 0; at < bytes.length; at += 7) writes.push(req.conn.write(bytes.subarray(at, at + 7)));
        await Promise.all(writes);
      });
      const reply = await http1Post(server.origin, "{}").reply;
      const pieces = await readPieces(reply.body(), () => Bun.sleep(0));
      expect(joined(pieces)).toBe(text);
    },
    T,
  );
});
