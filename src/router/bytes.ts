/**
 * Relays an answer's bytes (audio) to the client as they arrive, at the pace the client reads
 * them, and says once how it ended: the upstream finished, broke off or went silent for
 * idleTimeoutMs (its connection is then aborted), or the client stopped reading. The end of a
 * complete answer waits for what onEnd returns (the commit of its charge) before it closes.
 */
type BytesEnd = "complete" | "upstream_error" | "client_closed";

export interface BytesRelayOptions {
  idleTimeoutMs: number;
  abortUpstream: (reason: string) => void;
  /** Called exactly once, however the relay ends. */
  onEnd: (ended: BytesEnd) => Promise<void> | void;
}

export function relayBytes(upstream: ReadableStream<Uint8Array>, options: BytesRelayOptions): ReadableStream<Uint8Array> {
  const reader = upstream.getReader();
  let ended = false;
  const end = (how: BytesEnd): Promise<void> | void => {
    if (ended) return;
    ended = true;
    return options.onEnd(how);
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const timer = setTimeout(() => options.abortUpstream("idle"), options.idleTimeoutMs);
        try {
          const { done, value } = await reader.read();
          if (done) {
            const committed = end("complete");
            if (committed) await committed;
            controller.close();
          } else controller.enqueue(value);
        } catch {
          end("upstream_error");
          controller.error(new Error("the upstream broke off its answer"));
        } finally {
          clearTimeout(timer);
        }
      },
      cancel() {
        options.abortUpstream("client gone");
        reader.cancel().catch(() => {});
        end("client_closed");
      },
    },
    { highWaterMark: 0 },
  );
}
