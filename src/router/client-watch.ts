/**
 * Watches a request while it waits on an upstream, for the two reasons to give up on the
 * upstream's answer: the client went away, or the upstream did not answer (send its response
 * headers) within `first_byte_timeout_ms`. Either way the watch calls onGone, which aborts the
 * current upstream exchange.
 *
 * Neither costs a per-request timer or listener on the fast path:
 * - Asking Bun for a request's AbortSignal and listening on it costs more than the rest of a fast
 *   request's routing, so a request only listens once it has been in flight for one sweep
 *   (SWEEP_MS): most answers are complete before then, and a client that left during a slow one
 *   is noticed within SWEEP_MS.
 * - Attempts that share a timeout share one queue: their deadlines come in the order they start,
 *   so one timer, armed for the oldest, serves them all, exactly on time.
 * Requests in flight and attempts waiting on a deadline are doubly linked lists through their
 * Watch, so starting and ending either is a few pointer swaps.
 *
 *   const watch = watchClient(request);
 *   watch.onGone = abortUpstream; watch.answerWithin(ms); ... watch.answered(); ... watch.done();
 */

const SWEEP_MS = 200;

export interface ClientWatch {
  /** The client has gone away. */
  readonly gone: boolean;
  /** The current attempt's upstream did not answer within its timeout. */
  readonly timedOut: boolean;
  /** Called when the client goes away or the attempt times out (the current upstream exchange's abort). */
  onGone: ((reason: string) => void) | null;
  /** Starts the current attempt's first-byte deadline: `ms` from now, onGone("timeout"). */
  answerWithin(ms: number): void;
  /** The upstream answered (or failed): the attempt's deadline no longer applies. */
  answered(): void;
  /**
   * Whether the client has gone, asking the request's own abort signal now: for the moments an
   * answer is about to be charged for or sent, when a departure since the last sweep (Bun closes a
   * connection on which a request is pipelined behind a pending one) must not be missed.
   */
  goneNow(): boolean;
  /** The request is answered: stop watching. */
  done(): void;
}

class Watch implements ClientWatch {
  gone = false;
  timedOut = false;
  onGone: ((reason: string) => void) | null = null;
  listening = false;
  /** Links in the list of requests in flight (pointing at itself when not in it). */
  prev: Watch = this;
  next: Watch = this;
  /** Links in a deadline queue, and the queue (null when not in one). */
  deadline = 0;
  queue: DeadlineQueue | null = null;
  earlier: Watch = this;
  later: Watch = this;

  constructor(readonly request: Request | null) {}

  /** Called by the sweep: from now on the request's own abort signal reports a departure. */
  listen(): void {
    this.listening = true;
    const signal = this.request!.signal;
    if (signal.aborted) this.leave();
    else signal.addEventListener("abort", () => this.leave(), { once: true });
  }

  leave(): void {
    if (this.gone) return;
    this.gone = true;
    this.unlink();
    this.onGone?.("client closed");
  }

  goneNow(): boolean {
    if (!this.gone && this.request!.signal.aborted) this.leave();
    return this.gone;
  }

  answerWithin(ms: number): void {
    this.answered();
    this.timedOut = false;
    deadlineQueue(ms).add(this);
  }

  answered(): void {
    this.queue?.remove(this);
  }

  done(): void {
    this.onGone = null;
    this.answered();
    this.unlink();
  }

  link(): void {
    this.prev = inFlight.prev;
    this.next = inFlight;
    inFlight.prev.next = this;
    inFlight.prev = this;
  }

  /** Leaves the watch pointing at itself, so unlinking twice changes nothing. */
  unlink(): void {
    this.prev.next = this.next;
    this.next.prev = this.prev;
    this.prev = this.next = this;
  }
}

/** Attempts with the same timeout, oldest first, and one timer for the oldest's deadline. */
class DeadlineQueue {
  private readonly oldest = new Watch(null); // sentinel: .later is the oldest, .earlier the newest
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly ms: number) {}

  add(watch: Watch): void {
    watch.deadline = performance.now() + this.ms;
    watch.queue = this;
    watch.earlier = this.oldest.earlier;
    watch.later = this.oldest;
    this.oldest.earlier.later = watch;
    this.oldest.earlier = watch;
    if (this.timer === null) this.arm(this.ms);
  }

  remove(watch: Watch): void {
    watch.earlier.later = watch.later;
    watch.later.earlier = watch.earlier;
    watch.earlier = watch.later = watch;
    watch.queue = null;
  }

  private arm(delay: number): void {
    this.timer = setTimeout(this.expire, Math.max(1, Math.ceil(delay)));
    this.timer.unref();
  }

  /** Times out every attempt past its deadline; re-arms for the oldest left. */
  private readonly expire = (): void => {
    this.timer = null;
    const now = performance.now();
    for (let first = this.oldest.later; first !== this.oldest && first.deadline <= now; first = this.oldest.later) {
      this.remove(first);
      first.timedOut = true;
      first.onGone?.("timeout");
    }
    if (this.oldest.later !== this.oldest) this.arm(this.oldest.later.deadline - now);
  };
}

const inFlight = new Watch(null); // sentinel of the list of requests in flight
const queues = new Map<number, DeadlineQueue>();
let sweeper: ReturnType<typeof setInterval> | null = null;

function deadlineQueue(ms: number): DeadlineQueue {
  let queue = queues.get(ms);
  if (queue === undefined) queues.set(ms, (queue = new DeadlineQueue(ms)));
  return queue;
}

function sweep(): void {
  // Collected first: a departure found while listening may end watches, changing the list.
  const fresh: Watch[] = [];
  for (let watch = inFlight.next; watch !== inFlight; watch = watch.next) if (!watch.listening) fresh.push(watch);
  for (const watch of fresh) if (watch.next !== watch) watch.listen();
}

export function watchClient(request: Request): ClientWatch {
  const watch = new Watch(request);
  watch.link();
  if (sweeper === null) {
    sweeper = setInterval(sweep, SWEEP_MS);
    sweeper.unref();
  }
  return watch;
}
