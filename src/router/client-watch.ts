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

class Watch implements ClientWatch {
  gone = false;
  onGone: ((reason: string) => void) | null = null;
  listening = false;

  constructor(readonly request: Request) {}

  /** Called by the sweep: from now on the request's own abort signal reports a departure. */
  listen(): void {
    this.listening = true;
    const signal = this.request.signal;
    if (signal.aborted) this.leave();
    else signal.addEventListener("abort", () => this.leave(), { once: true });
  }

  leave(): void {
    if (this.gone) return;
    this.gone = true;
    watched.delete(this);
    this.onGone?.("client closed");
  }

  done(): void {
    this.onGone = null;
    watched.delete(this);
  }
}

const watched = new Set<Watch>();
let sweeper: ReturnType<typeof setInterval> | null = null;

function sweep(): void {
  for (const watch of watched) if (!watch.listening) watch.listen();
}

export function watchClient(request: Request): ClientWatch {
  const watch = new Watch(request);
  watched.add(watch);
  if (sweeper === null) {
    sweeper = setInterval(sweep, SWEEP_MS);
    sweeper.unref();
  }
  return watch;
}
