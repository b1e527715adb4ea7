/**
 * The HTTP/1.1 client's pure parsers (src/router/http1-parse.ts), byte for byte: parseHead on
 * complete, partial and malformed heads, and ChunkedDecoder fed whole, byte by byte and split.
 */
import { describe, expect, test } from "bun:test";
import { ChunkedDecoder, MAX_HEAD_BYTES, parseHead, ProtocolError } from "../../src/router/http1-parse";

function head(text: string): ReturnType<typeof parseHead> {
  return parseHead(Buffer.from(text, "latin1"));
}

describe("parseHead", () => {
  test("an incomplete head is null, at every length short of the blank line", () => {
    const full = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n";
    for (let n = 0; n < full.length; n++) expect(head(full.slice(0, n))).toBeNull();
    expect(head(full)?.size).toBe(full.length);
    expect(head(`${full}ok`)?.size).toBe(full.length);
  });

  test("bare LF line endings, or a mix, read as CRLF; the head ends at its first blank line, not at a CRLFCRLF in the body", () => {
    const body = "5\r\nhello\r\n0\r\n\r\n";
    for (const text of ["HTTP/1.1 200 OK\ntransfer-encoding: chunked\nx-a: 1\n\n", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\nx-a: 1\n\r\n"]) {
      for (let n = 0; n < text.length; n++) expect(head(text.slice(0, n))).toBeNull();
      const parsed = head(text + body)!;
      expect(parsed.size).toBe(text.length);
      expect(parsed.framing).toBe("chunked");
      expect(parsed.headers.get("x-a")).toBe("1");
      expect(parsed.headers.get("transfer-encoding")).toBe("chunked");
    }
  });

  test("more than MAX_HEAD_BYTES without a blank line is a ProtocolError", () => {
    const long = `HTTP/1.1 200 OK\r\nx-big: ${"a".repeat(MAX_HEAD_BYTES)}`;
    expect(() => head(long)).toThrow(ProtocolError);
    expect(head(long.slice(0, MAX_HEAD_BYTES))).toBeNull();
  });

  test("names lower-cased, values trimmed, repeated headers joined with ', '", () => {
    const parsed = head("HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-Thing:   spaced  \r\nset-cookie: b=2\r\nSET-COOKIE:c=3\r\ncontent-length: 0\r\n\r\n")!;
    expect(parsed.status).toBe(200);
    expect(parsed.headers.get("set-cookie")).toBe("a=1, b=2, c=3");
    expect(parsed.headers.get("x-thing")).toBe("spaced");
    expect(parsed.headers.get("thing")).toBeNull(); // a name's tail is not the name
    expect(parsed.headers.get("x-missing")).toBeNull();
    expect(parsed.framing).toBe("length");
    expect(parsed.length).toBe(0);
    expect(parsed.keepAlive).toBe(true);
  });

  test("204, 304 and 1xx have no body, whatever their headers say", () => {
    for (const status of ["204 No Content", "304 Not Modified", "100 Continue", "103 Early Hints"]) {
      const parsed = head(`HTTP/1.1 ${status}\r\ncontent-length: 10\r\ntransfer-encoding: chunked\r\n\r\n`)!;
      expect(parsed.framing).toBe("empty");
      expect(parsed.keepAlive).toBe(true);
    }
  });

  test("transfer-encoding: chunked last is chunked", () => {
    expect(head("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n")!.framing).toBe("chunked");
    const chunked = head("HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n")!;
    expect(chunked.framing).toBe("chunked");
    expect(chunked.keepAlive).toBe(true);
  });

  test("Transfer-Encoding with Content-Length (RFC 9112 §6.3), or in an HTTP/1.0 answer, is a ProtocolError", () => {
    expect(() => head("HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n")).toThrow("both Transfer-Encoding and Content-Length");
    expect(() => head("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ncontent-length: 5\r\n\r\n")).toThrow(ProtocolError);
    expect(() => head("HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")).toThrow("Transfer-Encoding in an HTTP/1.0 answer");
  });

  test("a whole head longer than MAX_HEAD_BYTES is a ProtocolError too, however it arrived", () => {
    const padded = (bytes: number): string => {
      const start = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nx-pad: ";
      return `${start}${"a".repeat(bytes - start.length - 4)}\r\n\r\n`;
    };
    expect(head(padded(MAX_HEAD_BYTES))!.size).toBe(MAX_HEAD_BYTES);
    expect(() => head(padded(MAX_HEAD_BYTES + 1))).toThrow("the response head is too large");
    expect(() => head(padded(1024 * 1024))).toThrow("the response head is too large");
    // A short bare-LF head, and a CRLFCRLF far into its body, is no long head.
    const loose = `HTTP/1.1 200 OK\ncontent-length: ${MAX_HEAD_BYTES * 2}\n\n`;
    expect(head(`${loose}${"b".repeat(MAX_HEAD_BYTES)}\r\n\r\n`)!.size).toBe(loose.length);
  });

  test("status 101 (no upgrade was asked for) and statuses below 100 are ProtocolErrors; other 1xx are interim", () => {
    expect(() => head("HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n")).toThrow("101 Switching Protocols");
    for (const status of ["000", "099", "042"]) expect(() => head(`HTTP/1.1 ${status} Odd\r\ncontent-length: 0\r\n\r\n`)).toThrow(`invalid status ${status}`);
    for (const status of [100, 102, 103]) expect(head(`HTTP/1.1 ${status} Wait\r\n\r\n`)!.status).toBe(status);
  });

  test("transfer-encoding without chunked last, or no framing header at all: until close, not kept alive", () => {
    for (const te of ["transfer-encoding: gzip\r\n", "transfer-encoding: chunked, gzip\r\n", ""]) {
      const parsed = head(`HTTP/1.1 200 OK\r\n${te}\r\n`)!;
      expect(parsed.framing).toBe("until-close");
      expect(parsed.keepAlive).toBe(false);
    }
  });

  test("keep-alive: HTTP/1.1 unless close, HTTP/1.0 only with keep-alive", () => {
    const keepAlive = (version: string, connection: string): boolean => head(`HTTP/${version} 200 OK\r\n${connection}content-length: 0\r\n\r\n`)!.keepAlive;
    expect(keepAlive("1.1", "")).toBe(true);
    expect(keepAlive("1.1", "connection: close\r\n")).toBe(false);
    expect(keepAlive("1.1", "Connection: Close\r\n")).toBe(false);
    expect(keepAlive("1.0", "")).toBe(false);
    expect(keepAlive("1.0", "connection: keep-alive\r\n")).toBe(true);
  });

  test("Content-Length: repeated equal values are accepted; anything else is a ProtocolError", () => {
    expect(head("HTTP/1.1 200 OK\r\ncontent-length: 12, 12\r\n\r\n")!.length).toBe(12);
    expect(head("HTTP/1.1 200 OK\r\ncontent-length: 7\r\ncontent-length: 7\r\n\r\n")!.length).toBe(7);
    for (const bad of ["12, 13", "-1", "0x10", "1e3", "", "12 13", "9999999999999999"]) {
      expect(() => head(`HTTP/1.1 200 OK\r\ncontent-length: ${bad}\r\n\r\n`)).toThrow(ProtocolError);
    }
  });

  test("a status line without a reason phrase is fine", () => {
    expect(head("HTTP/1.1 200\r\ncontent-length: 0\r\n\r\n")!.status).toBe(200);
  });

  test("a status line that is not HTTP/1.x, and a header line without a name or with space around it, are ProtocolErrors", () => {
    for (const bad of [
      "SSH-2.0-OpenSSH\r\n\r\n",
      "HTTP/2 200\r\n\r\n",
      "HTTP/1.1 20 OK\r\n\r\n",
      "HTTP/1.1 200 OK\r\n: x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nnocolon\r\n\r\n",
      "HTTP/1.1 200 OK\r\ncontent-length : 5\r\n\r\n",
      "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
    ]) {
      expect(() => head(bad)).toThrow(ProtocolError);
    }
    expect(head("HTTP/1.1 200\r\ncontent-length: 0\r\n\r\n")!.status).toBe(200); // no reason phrase
  });
});

describe("ChunkedDecoder", () => {
  const body = `5;ext=1\r\nhello\r\nA\r\n0123456789\r\n1f\r\n${"x".repeat(31)}\r\n0\r\ntrailer: yes\r\n\r\n`;
  const data = `hello0123456789${"x".repeat(31)}`;

  function decode(decoder: ChunkedDecoder, input: Buffer): { out: string; used: number } {
    const pieces: Buffer[] = [];
    const used = decoder.feed(input, (piece) => pieces.push(Buffer.from(piece)));
    return { out: Buffer.concat(pieces).toString("latin1"), used };
  }

  test("all at once: the data, and every byte consumed", () => {
    const decoder = new ChunkedDecoder();
    expect(decode(decoder, Buffer.from(body))).toEqual({ out: data, used: body.length });
    expect(decoder.done).toBe(true);
  });

  test("byte by byte gives the same data; done only after the final CRLF", () => {
    const decoder = new ChunkedDecoder();
    let out = "";
    for (let i = 0; i < body.length; i++) {
      expect(decoder.done).toBe(false);
      const step = decode(decoder, Buffer.from(body[i], "latin1"));
      expect(step.used).toBe(1);
      out += step.out;
    }
    expect(decoder.done).toBe(true);
    expect(out).toBe(data);
  });

  test("every split into two feeds gives the same data", () => {
    for (let at = 0; at <= body.length; at++) {
      const decoder = new ChunkedDecoder();
      const a = decode(decoder, Buffer.from(body.slice(0, at)));
      const b = decode(decoder, Buffer.from(body.slice(at)));
      expect(a.out + b.out).toBe(data);
      expect(a.used + b.used).toBe(body.length);
      expect(decoder.done).toBe(true);
    }
  });

  test("bytes after the final CRLF are reported as not consumed, and later feeds take nothing", () => {
    const decoder = new ChunkedDecoder();
    const { out, used } = decode(decoder, Buffer.from(`${body}HTTP/1.1 200 OK\r\n`));
    expect(out).toBe(data);
    expect(used).toBe(body.length);
    expect(decoder.done).toBe(true);
    expect(decode(decoder, Buffer.from("3\r\nabc\r\n"))).toEqual({ out: "", used: 0 });
  });

  test("an invalid chunk size, and data longer than its size, are ProtocolErrors", () => {
    expect(() => decode(new ChunkedDecoder(), Buffer.from("zz\r\n"))).toThrow(ProtocolError);
    expect(() => decode(new ChunkedDecoder(), Buffer.from("\r\n"))).toThrow(ProtocolError);
    expect(() => decode(new ChunkedDecoder(), Buffer.from("-1\r\n"))).toThrow(ProtocolError);
    expect(() => decode(new ChunkedDecoder(), Buffer.from("2\r\nabc\r\n"))).toThrow(ProtocolError);
  });

  test("a chunk-size line longer than the line limit is a ProtocolError", () => {
    expect(() => decode(new ChunkedDecoder(), Buffer.from(`1;${"e".repeat(5_000)}`))).toThrow(ProtocolError);
  });
});
