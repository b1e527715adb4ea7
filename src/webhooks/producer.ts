/**
 * WebhookProducer: the library API for TypeScript users running their own job handlers. It is an
 * async iterable of JobCalls leased from the durable outbox:
 *
 *   for await (const call of gateway.producer({ jobIds: [7] })) {
 *     try { await handle(call.body, call.metadata); await call.ack(); }
 *     catch (err) { await call.fail(String(err)); }
 *   }
 *
 * Delivery is at least once: a call that is neither acked nor failed before its lease runs out
 * is delivered again (attempt + 1). Long handlers call `extend()` to keep their lease. The
 * producer wakes as soon as the gateway commits new calls and otherwise polls every `pollMs`
 * (backoffs and expired leases make calls due without an event).
 */
import type { Outbox } from "./outbox";
import type { ClaimedRow, JobState } from "./calls";
import { readStoredHeaders, type StoredHeader } from "./headers";

export const METADATA = {
  serviceId: "X-GATEWAY-SERVICE-ID",
  callId: "X-GATEWAY-CALL-ID",
  path: "X-WEBHOOK-PATH",
  name: "X-WEBHOOK-NAME",
  origin: "X-WEBHOOK-ORIGIN",
  githubEvent: "X-WEBHOOK-GITHUB-EVENT",
  githubDelivery: "X-WEBHOOK-GITHUB-DELIVERY",
} as const;

export interface JobCall {
  jobId: number;
  callId: number;
  /** 1 for the first delivery; ack/fail/extend are fenced by it. */
  attempt: number;
  /** The request body, byte for byte. */
  body: Uint8Array;
  contentType: string | null;
  /** The allowlisted request headers the sender sent (./headers.ts), names lower-case. */
  headers: Partial<Record<StoredHeader, string>>;
  /**
   * X-GATEWAY-SERVICE-ID, X-GATEWAY-CALL-ID, X-WEBHOOK-PATH, X-WEBHOOK-NAME (if named),
   * X-WEBHOOK-ORIGIN, and X-WEBHOOK-GITHUB-EVENT / X-WEBHOOK-GITHUB-DELIVERY when GitHub sent them.
   */
  metadata: Record<string, string>;
  leaseUntil: number;
  /** Done. False when the lease was lost (the call may run again elsewhere). */
  ack(): Promise<boolean>;
  /** Retry after a backoff, or `dead` when out of attempts; null when the lease was lost. */
  fail(error?: string): Promise<JobState | null>;
  /** Keeps the lease for another `leaseMs` (default: the configured lease). */
  extend(leaseMs?: number): Promise<boolean>;
  /** Hands the call back undelivered, with its attempt (a stop ended it, not the handler). */
  release(): Promise<boolean>;
}

/**
 * GitHub's event and delivery id are under the gateway's own X-WEBHOOK- prefix: a command's
 * environment never inherits a variable of that prefix, so X_WEBHOOK_GITHUB_EVENT is always the
 * sender's, and a forward target cannot mistake it for a request GitHub signed.
 */
export function jobMetadata(row: Pick<ClaimedRow, "serviceId" | "callId" | "path" | "name" | "headers">): Record<string, string> {
  const metadata: Record<string, string> = {
    [METADATA.serviceId]: String(row.serviceId),
    [METADATA.callId]: String(row.callId),
    [METADATA.path]: row.path,
  };
  if (row.name !== null) metadata[METADATA.name] = row.name;
  metadata[METADATA.origin] = "webhook";
  const headers = readStoredHeaders(row.headers);
  if (headers["x-github-event"] !== undefined) metadata[METADATA.githubEvent] = headers["x-github-event"];
  if (headers["x-github-delivery"] !== undefined) metadata[METADATA.githubDelivery] = headers["x-github-delivery"];
  return metadata;
}

function toJobCall(outbox: Outbox, row: ClaimedRow): JobCall {
  return {
    jobId: row.jobId,
    callId: row.callId,
    attempt: row.attempt,
    body: row.body,
    contentType: row.contentType,
    headers: readStoredHeaders(row.headers),
    metadata: jobMetadata(row),
    leaseUntil: row.leaseUntil,
    ack: () => outbox.ack(row.callId, row.attempt),
    fail: (error = "failed") => outbox.fail(row.callId, row.attempt, error),
    extend: async (leaseMs) => (await outbox.extend(row.callId, row.attempt, leaseMs)) !== null,
    release: () => outbox.release(row.callId, row.attempt),
  };
}

export interface ProducerOptions {
  /** Only calls of these jobs; every job when absent. */
  jobIds?: readonly number[];
  leaseMs?: number;
  /** Longest wait between looks at the outbox when nothing new arrives. Default 1000. */
  pollMs?: number;
  signal?: AbortSignal;
}

export class WebhookProducer implements AsyncIterable<JobCall> {
  private closed = false;
  private wakers = new Set<() => void>();
  private readonly unsubscribe: () => void;

  constructor(
    private readonly outbox: Outbox,
    private readonly options: ProducerOptions = {},
  ) {
    this.unsubscribe = outbox.onAppend(() => this.wake());
    options.signal?.addEventListener("abort", () => this.close(), { once: true });
  }

  /** The next due call, waiting for one; null once the producer is closed. */
  async next(): Promise<JobCall | null> {
    while (!this.closed) {
      const waiting = this.waitForWork();
      let row: ClaimedRow | undefined;
      try {
        [row] = await this.outbox.claim({ limit: 1, leaseMs: this.options.leaseMs, jobIds: this.options.jobIds });
      } catch {
        // The outbox is unwritable for now (full or read-only disk): wait a poll interval and retry.
        await waiting.promise;
        continue;
      }
      if (row) {
        waiting.cancel();
        if (this.closed) {
          // Closed while claiming: hand the call straight back rather than drop the lease.
          await this.outbox.release(row.callId, row.attempt);
          return null;
        }
        return toJobCall(this.outbox, row);
      }
      await waiting.promise;
    }
    return null;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<JobCall> {
    for (;;) {
      const call = await this.next();
      if (call === null) return;
      yield call;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    this.wake();
  }

  private wake(): void {
    for (const waker of this.wakers) waker();
  }

  /** Armed before the claim so a commit that lands during the claim is not missed. */
  private waitForWork(): { promise: Promise<void>; cancel: () => void } {
    let done!: () => void;
    const promise = new Promise<void>((resolve) => (done = resolve));
    const timer = setTimeout(() => finish(), this.options.pollMs ?? 1_000);
    const finish = (): void => {
      clearTimeout(timer);
      this.wakers.delete(finish);
      done();
    };
    this.wakers.add(finish);
    return { promise, cancel: finish };
  }
}
