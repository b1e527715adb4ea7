/**
 * Finds the `model` field of a multipart/form-data body (RFC 7578) as its bytes go by, holding at
 * most one part's headers or the model's value, never a file: between them it keeps only the last
 * few bytes, where a delimiter could be split across two reads. It also says where in the body the
 * model's value lies, so that each target can be sent its own name for the model.
 */
import { GatewayError } from "../errors";

/** A part's headers, and a model name, may be no longer than these. */
const MAX_PART_HEADER_BYTES = 16 * 1024;
const MAX_MODEL_BYTES = 1024;
const CRLF = Buffer.from("\r\n");
const HEADERS_END = Buffer.from("\r\n\r\n");

/** The boundary of a multipart/form-data Content-Type, or null when it is not one. */
export function multipartBoundary(contentType: string): string | null {
  if (!/^\s*multipart\/form-data\s*(;|$)/i.test(contentType)) return null;
  const match = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  return match ? (match[1] ?? match[2]) : null;
}

function malformed(why: string): GatewayError {
  return new GatewayError("invalid_request_error", `The multipart upload is malformed: ${why}`);
}

/** The model's value: its text, and its bytes' offsets in the body [start, end). */
export interface ModelField {
  model: string;
  start: number;
  end: number;
}

export class ModelFieldScanner {
  private readonly delimiter: Buffer;
  /** The body is read as if it began with CRLF, so its first delimiter looks like every other. */
  private pending: Buffer = CRLF;
  /** The offset in the body of pending's first byte. */
  private base = -CRLF.length;
  private state: "delimiter" | "after-delimiter" | "headers" | "value" = "delimiter";

  constructor(boundary: string) {
    this.delimiter = Buffer.from(`\r\n--${boundary}`);
  }

  /**
   * What is pending with `bytes` after it. Between parts (a file's bytes, mostly) without copying
   * the chunk: unless a delimiter spans the join, what is pending starts in the chunk itself.
   */
  private joined(bytes: Buffer): Buffer {
    const short = bytes.length < this.delimiter.length - 1; // the seam would not hold every delimiter begun in pending
    if (this.state !== "delimiter" || this.pending.length >= this.delimiter.length || short) return Buffer.concat([this.pending, bytes]);
    const seam = Buffer.concat([this.pending, bytes.subarray(0, this.delimiter.length - 1)]);
    if (seam.indexOf(this.delimiter) !== -1) return Buffer.concat([this.pending, bytes]);
    this.base += this.pending.length;
    return bytes;
  }

  /** Feeds the next bytes; the model once its value is whole, else null. GatewayError (400) for a body with none or malformed. */
  push(chunk: Uint8Array): ModelField | null {
    let pending = this.joined(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    const skip = (bytes: number): void => {
      pending = pending.subarray(bytes);
      this.base += bytes;
    };
    for (;;) {
      if (this.state === "delimiter") {
        const at = pending.indexOf(this.delimiter);
        if (at === -1) {
          // Only a delimiter's beginning can matter; a copy, so the chunk itself is not retained.
          skip(Math.max(0, pending.length - this.delimiter.length + 1));
          this.pending = Buffer.from(pending);
          return null;
        }
        skip(at + this.delimiter.length);
        this.state = "after-delimiter";
      }
      if (this.state === "after-delimiter") {
        if (pending.length < 2) break;
        if (pending[0] === 45 && pending[1] === 45)
          throw new GatewayError("invalid_request_error", "The upload has no model field; send one beside the file", { param: "model" });
        const eol = pending.indexOf(CRLF);
        if (eol === -1) {
          if (pending.length > MAX_PART_HEADER_BYTES) throw malformed("a delimiter line does not end");
          break;
        }
        skip(eol + 2);
        this.state = "headers";
      }
      if (this.state === "headers") {
        // A part with no headers at all ends them at once.
        const end = pending.subarray(0, 2).equals(CRLF) ? -2 : pending.indexOf(HEADERS_END);
        if (end === -1) {
          if (pending.length > MAX_PART_HEADER_BYTES) throw malformed("a part's headers are too long");
          break;
        }
        const name = /(?:^|\r\n)content-disposition:[^\r\n]*;\s*name=(?:"([^"]*)"|([^\s;]*))/i.exec(pending.subarray(0, Math.max(0, end)).toString("latin1"));
        skip(end + 4);
        this.state = (name?.[1] ?? name?.[2]) === "model" ? "value" : "delimiter";
      }
      if (this.state === "value") {
        const at = pending.indexOf(this.delimiter);
        if (at === -1) {
          if (pending.length > MAX_MODEL_BYTES + this.delimiter.length)
            throw new GatewayError("invalid_request_error", `The upload's model field is longer than ${MAX_MODEL_BYTES} bytes`, { param: "model" });
          break;
        }
        return { model: pending.subarray(0, at).toString("utf8").trim(), start: this.base, end: this.base + at };
      }
    }
    this.pending = Buffer.from(pending);
    return null;
  }
}
