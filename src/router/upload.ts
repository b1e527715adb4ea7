/**
 * A multipart upload (an audio file) passed through to the upstream as a stream, never held whole.
 * The route comes from the upload's `model` field, read from the stream as it arrives (./multipart-model.ts).
 * What arrives before that field is kept to be sent first: in memory up to SPOOL_MEMORY_BYTES,
 * then in a temporary file, since clients often send the file before the model (the openai SDK
 * sends fields in the order the caller wrote them, `{ file, model }` in its own examples). Once
 * the model is known, the upstream reads the kept bytes and then the rest of the client's body,
 * at the pace the upstream takes them, with the model's value replaced by the target's name for it.
 *
 * Invariants: no upload passes `limit` bytes (one declared larger is read and dropped, never held,
 * and refused; one that grows larger is cut off there); the temporary file is removed however the
 * upload ends; memory stays flat however large the upload: every chunk read in JavaScript is
 * garbage a moment later, and the collector, which does not count the buffers' bytes as pressure,
 * would let megabytes of them pile up (a 20 MB upload grew the process by 10 to 25 MB), so a
 * collection runs every COLLECT_EVERY_BYTES.
 */
import { open, unlink, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GatewayError } from "../errors";
import { refuseAfterReading, tooLarge } from "../body";
import { ModelFieldScanner, multipartBoundary, type ModelField } from "./multipart-model";

/** Bytes before the model field kept in memory; past this they go to a temporary file. */
const SPOOL_MEMORY_BYTES = 256 * 1024;
/** The piece of the temporary file read per pull. */
const SPOOL_READ_BYTES = 128 * 1024;
/** An upload's bytes handled between two garbage collections (see the header). */
const COLLECT_EVERY_BYTES = 1024 * 1024;

export interface Upload {
  model: string;
  /** The client's Content-Type, boundary included: the upstream is sent the body as it came. */
  contentType: string;
  /** The body for a target that calls the model `model`, once (null after): an upload cannot be sent to a second target. */
  take(model: string): ReadableStream<Uint8Array> | null;
  /** Why the body could not be sent whole (over the limit, the client stopped sending), or null. */
  failure(): GatewayError | null;
  /** Removes the temporary file and stops reading the client's body (idempotent). */
  dispose(): void;
}

function expectsMultipart(): GatewayError {
  return new GatewayError(
    "invalid_request_error",
    "This endpoint takes a multipart/form-data upload (a file and a model field), with its boundary in the Content-Type",
    { param: "content-type" },
  );
}

/** Reads `request` until its model field has arrived; GatewayError (400, 413) when it cannot. */
export async function readUpload(request: Request, limit: number): Promise<Upload> {
  const contentType = request.headers.get("content-type") ?? "";
  const boundary = multipartBoundary(contentType);
  if (boundary === null || !request.body) throw expectsMultipart();
  const declared = Number(request.headers.get("content-length") ?? NaN);
  // Read and dropped, never held, before the 413, as a JSON body over the limit is (../body.ts).
  if (declared > limit) await refuseAfterReading(request, declared, limit);
  const reader = request.body.getReader();
  const scanner = new ModelFieldScanner(boundary);
  const kept: Uint8Array[] = [];
  let keptBytes = 0;
  let spool: { path: string; file: FileHandle } | null = null;
  let seen = 0;
  let sinceCollected = 0;
  /** Counts bytes handled, collecting garbage every COLLECT_EVERY_BYTES. */
  const handled = (bytes: number): void => {
    sinceCollected += bytes;
    if (sinceCollected < COLLECT_EVERY_BYTES) return;
    sinceCollected = 0;
    Bun.gc(true);
  };
  let failure: GatewayError | null = null;
  let readerDone = false;
  const dispose = (): void => {
    if (!readerDone) reader.cancel().catch(() => {});
    readerDone = true;
    if (spool !== null) {
      const { path, file } = spool;
      spool = null;
      file.close().finally(() => unlink(path).catch(() => {}));
    }
  };
  let field: ModelField | null = null;
  try {
    while (field === null) {
      const { done, value } = await reader.read();
      if (done) {
        readerDone = true;
        throw new GatewayError("invalid_request_error", "The upload has no model field; send one beside the file", { param: "model" });
      }
      seen += value.byteLength;
      if (seen > limit) throw tooLarge(limit);
      handled(value.byteLength);
      field = scanner.push(value);
      if (spool === null && keptBytes + value.byteLength <= SPOOL_MEMORY_BYTES) {
        kept.push(value);
        keptBytes += value.byteLength;
        continue;
      }
      if (spool === null) {
        const path = join(tmpdir(), `modelgate-upload-${crypto.randomUUID()}`);
        spool = { path, file: await open(path, "wx+", 0o600) };
      }
      await spool.file.write(value);
    }
  } catch (err) {
    dispose();
    // A body that breaks off (the client left) is its client's doing, not an error of the gateway's.
    throw err instanceof GatewayError ? err : new GatewayError("client_closed_request", "the client stopped sending its upload");
  }
  const { model } = field;
  if (model.length === 0) {
    dispose();
    throw new GatewayError("invalid_request_error", "The upload's model field is empty", { param: "model" });
  }
  /** How far the spool file has been sent on. */
  let spooledOut = 0;
  let taken = false;
  const body = (targetModel: string): ReadableStream<Uint8Array> => {
    const splice = splicer(field, Buffer.from(targetModel));
    const emit = (controller: ReadableStreamDefaultController<Uint8Array>, chunk: Uint8Array): void => {
      handled(chunk.byteLength);
      splice(controller, chunk);
    };
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          try {
            const next = kept.shift();
            if (next !== undefined) return emit(controller, next);
            if (spool !== null) {
              // Read a piece per pull, as the upstream takes them: a file stream would read ahead.
              const { bytesRead, buffer } = await spool.file.read(Buffer.allocUnsafe(SPOOL_READ_BYTES), 0, SPOOL_READ_BYTES, spooledOut);
              spooledOut += bytesRead;
              if (bytesRead > 0) return emit(controller, buffer.subarray(0, bytesRead));
              const { path, file } = spool;
              spool = null;
              await file.close();
              await unlink(path).catch(() => {});
            }
            const { done, value } = await reader.read();
            if (done) {
              readerDone = true;
              return controller.close();
            }
            seen += value.byteLength;
            if (seen > limit) {
              failure = tooLarge(limit);
              dispose();
              return controller.error(failure);
            }
            emit(controller, value);
          } catch (err) {
            failure ??= new GatewayError("client_closed_request", "the client stopped sending its upload");
            dispose();
            controller.error(err);
          }
        },
        cancel: dispose,
      },
      { highWaterMark: 0 },
    );
  };
  return {
    model,
    contentType,
    take: (targetModel) => (taken ? null : ((taken = true), body(targetModel))),
    failure: () => failure,
    dispose,
  };
}

/** Enqueues a body's chunks in order, with the bytes of `range` replaced by `replacement`. */
function splicer(range: ModelField, replacement: Uint8Array): (controller: ReadableStreamDefaultController<Uint8Array>, chunk: Uint8Array) => void {
  let offset = 0;
  return (controller, chunk) => {
    const from = offset;
    const to = (offset += chunk.byteLength);
    if (to <= range.start || from >= range.end) return controller.enqueue(chunk);
    if (range.start > from) controller.enqueue(chunk.subarray(0, range.start - from));
    if (range.start >= from) controller.enqueue(replacement);
    if (range.end < to) controller.enqueue(chunk.subarray(range.end - from));
  };
}
