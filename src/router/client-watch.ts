/**
 * Notices a client that went away while its request waits on an upstream, so the upstream
 * request is aborted and stops generating. Asking Bun for a request's AbortSignal and listening
 * on it costs more than the rest of a fast request's routing, so a request is only watched once
 * it has been in flight for one sweep (SWEEP_MS): most answers are complete before then, and a
 * client that left during a slow one is noticed within SWEEP_MS.
 *
 *   const watch = watchClient(request); ... watch.onGone = abortUpstream; ... watch.done();
 */

const SWEEP_MS = 200;

export interface ClientWatch {
  /** The client has gone away. */
  readonly gone: boolean;
  /** Called once when the client goes away (the current upstream exchange's abort). */
  onGone: ((reason: string) => void) | null;
  /** The request is answered: stop watching. */
  done(): void;
}

/**
 * Requests in flight form a doubly linked list through their Watch (head is a sentinel), so
 * starting and ending a watch is two pointer swaps: no hashing, no table to grow or shrink.
 */
class Watch implements ClientWatch {
  gone = false;
  onGone: ((reason: string) => void) | null = null;
  listening = false;
  prev: Watch = this;
  next: Watch = this;

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

  done(): void {
    this.onGone = null;
    this.unlink();
  }

  link(): void {
    this.prev = head.prev;
    this.next = head;
    head.prev.next = this;
    head.prev = this;
  }

  /** Leaves the watch pointing at itself, so unlinking twice changes nothing. */
  unlink(): void {
    this.prev.next = this.next;
    this.next.prev = this.prev;
    this.prev = this.next = this;
  }
}

const head = new Watch(null);
let sweeper: ReturnType<typeof setInterval> | null = null;

function sweep(): void {
  // Collected first: a departure found while listening may end watches, changing the list.
  const fresh: Watch[] = [];
  for (let watch = head.next; watch !== head; watch = watch.next) if (!watch.listening) fresh.push(watch);
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
