/**
 * How much of the bodies that are over their limit the gateway reads and drops, all clients
 * together. Reading an oversized upload to its end before the 413 is a courtesy to clients that
 * send before they read (Node's fetch, so the openai SDK under Node): they see the 413, not a
 * broken pipe. Sent at full speed it is a way to spend the gateway's CPU (about 1 ms per MiB), so
 * the courtesy has a budget: a bucket of DISCARD_BURST_BYTES that refills at
 * DISCARD_BYTES_PER_SECOND. Past it the 413 goes out at once and the connection closes unread.
 */

/** A burst that still fits: a client retrying a 10 MiB upload a few times in a row sees every 413. */
const DISCARD_BURST_BYTES = 128 * 1024 * 1024;
const DISCARD_BYTES_PER_SECOND = 64 * 1024 * 1024;

export class DiscardBudget {
  private bytes: number;
  private at: number;

  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly burst = DISCARD_BURST_BYTES,
    private readonly perSecond = DISCARD_BYTES_PER_SECOND,
  ) {
    this.bytes = burst;
    this.at = now();
  }

  /** Takes `bytes` when they are left (refilled for the time since the last take); false, taking nothing, when not. */
  take(bytes: number): boolean {
    const now = this.now();
    this.bytes = Math.min(this.burst, this.bytes + ((now - this.at) / 1000) * this.perSecond);
    this.at = now;
    if (bytes > this.bytes) return false;
    this.bytes -= bytes;
    return true;
  }
}

/** The process's one budget, shared by every endpoint that reads bodies. */
export const DISCARDS = new DiscardBudget();
