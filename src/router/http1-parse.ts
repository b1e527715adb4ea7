/**
 * The response side of HTTP/1.1 (RFC 9112) as the upstream client needs it: the status line and
 * header block, how the body is framed, and a decoder for chunked bodies. Pure functions over
 * bytes, so every boundary case (a head split across packets, a chunk size split mid-digit) is
 * testable without a socket.
 */

/** Longest status line plus header block accepted from an upstream. */
export const MAX_HEAD_BYTES = 65_536;
/** Longest chunk-size or trailer line accepted. */
const MAX_LINE_BYTES = 4_096;

type Framing = "length" | "chunked" | "until-close" | "empty";

export interface ResponseHead {
  status: number;
  headers: HeaderBlock;
  framing: Framing;
  /** Body length when framing is "length". */
  length: number;
  /** Whether the connection may carry another request once this body is complete. */
  keepAlive: boolean;
  /** Bytes of `buffer` the head took, the blank line included. */
  size: number;
}

export class ProtocolError extends Error {}

/** Needles of the names asked for (a handful: the client asks for fixed names only). */
const NEEDLES = new Map<string, string>();

/**
 * A response's header lines, looked up by name when asked: parsing a head makes no string or
 * object per header, and the client asks for only a few (framing, then Content-Type).
 */
export class HeaderBlock {
  /** `text`: the head without its blank line; `lower`: the same, lower-cased. */
  constructor(
    private readonly text: string,
    private readonly lower: string,
  ) {}

  /** A header by lower-case name, its value trimmed; a repeated header's values joined with ", ". */
  get(name: string): string | null {
    let needle = NEEDLES.get(name);
    if (needle === undefined) NEEDLES.set(name, (needle = `\r\n${name}:`));
    return this.find(needle);
  }

  /** The same, by `needle`: CRLF, the lower-case name and a colon. */
  private find(needle: string): string | null {
    let value: string | null = null;
    for (let at = this.lower.indexOf(needle); at !== -1; at = this.lower.indexOf(needle, at + needle.length)) {
      const from = at + needle.length;
      let end = this.text.indexOf("\r\n", from);
      if (end === -1) end = this.text.length;
      const one = this.text.slice(from, end).trim();
      value = value === null ? one : `${value}, ${one}`;
    }
    return value;
  }
}

const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?:[ \r]|$)/;

/** Parses the head at the start of `buffer`; null while it is incomplete. Throws ProtocolError. */
export function parseHead(buffer: Buffer): ResponseHead | null {
  const end = buffer.indexOf("\r\n\r\n");
  // A blank line past the bound is left to looseHead, which refuses a head that long (one that
  // arrived whole in one read as well as one that arrived in pieces) unless a bare-LF blank line
  // ends it sooner.
  if (end !== -1 && end <= MAX_HEAD_BYTES - 4) {
    const head = headOf(buffer.toString("latin1", 0, end), end + 4);
    if (head !== null) return head;
  }
  const loose = looseHead(buffer);
  return loose === null ? null : headOf(loose.text, loose.size);
}

/**
 * A head with bare LF line endings (RFC 9112 lets a recipient accept them), its text made CRLF
 * throughout, and the bytes it took up to its first blank line; null while none has arrived.
 */
function looseHead(buffer: Buffer): { text: string; size: number } | null {
  // Cheap native checks first: an incomplete CRLF head, arriving in pieces, comes here each time.
  if (buffer.indexOf("\n\n") === -1 && buffer.indexOf("\n\r\n") === -1) {
    if (buffer.length > MAX_HEAD_BYTES) throw new ProtocolError("the response head is too large");
    return null;
  }
  const scanned = buffer.toString("latin1", 0, Math.min(buffer.length, MAX_HEAD_BYTES));
  const blank = /\r?\n\r?\n/.exec(scanned);
  if (blank === null) throw new ProtocolError("the response head is too large");
  return { text: scanned.slice(0, blank.index).replace(/\r?\n/g, "\r\n"), size: blank.index + blank[0].length };
}

/**
 * The head from its text (without the blank line) and the bytes it took; null when a line ends in
 * a bare LF, found by the scan for line ends that the header check makes anyway.
 */
function headOf(text: string, size: number): ResponseHead | null {
  let lineEnd = lineEndFrom(text, 0);
  if (lineEnd === -2) return null;
  const statusLine = STATUS_LINE.exec(text);
  if (!statusLine) throw new ProtocolError(`not an HTTP/1.x status line: ${JSON.stringify(text.slice(0, Math.min(lineEnd, 40)))}`);
  // Every header line needs a name and a colon right after it: RFC 9112 allows no space before the
  // colon, and a line starting with a space (obsolete folding) is refused too.
  while (lineEnd < text.length) {
    const start = lineEnd + 2;
    lineEnd = lineEndFrom(text, start);
    if (lineEnd === -2) return null;
    const colon = text.indexOf(":", start);
    if (colon <= start || colon >= lineEnd || text.charCodeAt(start) <= 32 || text.charCodeAt(colon - 1) <= 32)
      throw new ProtocolError("malformed header line");
  }
  const headers = new HeaderBlock(text, text.toLowerCase());
  const status = Number(statusLine[2]);
  // Status codes run from 100 (RFC 9110 §15); 101 switches protocols, which the gateway never asks
  // for. Either way no answer follows on this connection, so waiting for one would wait for ever.
  if (status < 100) throw new ProtocolError(`invalid status ${statusLine[2]}`);
  if (status === 101) throw new ProtocolError("101 Switching Protocols, though no upgrade was asked for");
  const http11 = statusLine[1] === "1";
  const connection = headers.get("connection")?.toLowerCase() ?? "";
  let keepAlive = http11 ? !connection.includes("close") : connection.includes("keep-alive");
  let framing: Framing = "until-close";
  let length = 0;
  if (status < 200 || status === 204 || status === 304) {
    framing = "empty";
  } else {
    const transferEncoding = headers.get("transfer-encoding");
    const declaredLength = headers.get("content-length");
    if (transferEncoding !== null) {
      // Both framings at once (RFC 9112 §6.3: the mark of request smuggling), or Transfer-Encoding
      // from an HTTP/1.0 server (which cannot have sent it), leave the body's end in doubt: whatever
      // the gateway read as the end, the bytes after it would be read as the next answer.
      if (declaredLength !== null) throw new ProtocolError("both Transfer-Encoding and Content-Length");
      if (!http11) throw new ProtocolError("Transfer-Encoding in an HTTP/1.0 answer");
      if (/(?:^|,)\s*chunked\s*$/i.test(transferEncoding)) framing = "chunked";
    } else if (declaredLength !== null) {
      length = contentLength(declaredLength);
      framing = "length";
    }
  }
  if (framing === "until-close") keepAlive = false;
  return { status, headers, framing, length, keepAlive, size };
}

/** Where the line starting at `from` ends (its CR, or the end of `text`); -2 when it ends in a bare LF. */
function lineEndFrom(text: string, from: number): number {
  const lf = text.indexOf("\n", from);
  if (lf === -1) return text.length;
  return text.charCodeAt(lf - 1) === 13 ? lf - 1 : -2;
}

/** A Content-Length value; repeated identical values are allowed, anything else is refused. */
function contentLength(value: string): number {
  if (/^\d{1,15}$/.test(value)) return Number(value);
  const values = value.split(",").map((v) => v.trim());
  if (!values.every((v) => /^\d{1,15}$/.test(v) && v === values[0])) throw new ProtocolError("invalid Content-Length");
  return Number(values[0]);
}

enum ChunkState {
  Size,
  Data,
  DataEnd,
  Trailer,
  Done,
}

/**
 * Decodes a chunked body incrementally. feed() hands the data bytes to `emit` as they arrive and
 * returns how many bytes of `input` belonged to the body (all of them until the last chunk and
 * its trailer have been read; then `done` is true).
 */
export class ChunkedDecoder {
  done = false;
  private state = ChunkState.Size;
  private remaining = 0;
  private line = "";

  feed(input: Buffer, emit: (data: Buffer) => void): number {
    let i = 0;
    while (i < input.length && this.state !== ChunkState.Done) {
      if (this.state === ChunkState.Data) {
        const take = Math.min(this.remaining, input.length - i);
        emit(input.subarray(i, i + take));
        i += take;
        this.remaining -= take;
        if (this.remaining === 0) this.state = ChunkState.DataEnd;
        continue;
      }
      const newline = input.indexOf(10, i);
      const stop = newline === -1 ? input.length : newline;
      this.line += input.toString("latin1", i, stop);
      if (this.line.length > MAX_LINE_BYTES) throw new ProtocolError("a chunk line is too long");
      i = stop;
      if (newline === -1) break;
      i += 1;
      const line = this.line.endsWith("\r") ? this.line.slice(0, -1) : this.line;
      this.line = "";
      this.endLine(line);
    }
    return i;
  }

  private endLine(line: string): void {
    if (this.state === ChunkState.DataEnd) {
      if (line !== "") throw new ProtocolError("chunk data is longer than its size");
      this.state = ChunkState.Size;
    } else if (this.state === ChunkState.Size) {
      const size = line.split(";", 1)[0].trim();
      if (!/^[0-9a-fA-F]{1,12}$/.test(size)) throw new ProtocolError("invalid chunk size");
      this.remaining = parseInt(size, 16);
      this.state = this.remaining === 0 ? ChunkState.Trailer : ChunkState.Data;
    } else if (line === "") {
      this.state = ChunkState.Done;
      this.done = true;
    }
  }
}
