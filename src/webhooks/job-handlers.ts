/**
 * How one webhook call is run by its `[[jobs]]` handler (./jobs.ts runs the workers):
 * - `command = ["argv", ...]`: runs the program with the body on stdin and the metadata in the
 *   environment (X_GATEWAY_SERVICE_ID, X_GATEWAY_CALL_ID, X_WEBHOOK_PATH, X_WEBHOOK_NAME if
 *   named, X_WEBHOOK_ORIGIN, X_GATEWAY_JOB_ID, X_GATEWAY_ATTEMPT). Exit 0 acks; any other exit,
 *   a signal or `timeout_ms` fails the attempt. The command runs in a process group of its own, so
 *   a timeout kills whatever it started too (a script's `sleep`), and its stderr is read only until
 *   it exits (plus STDERR_GRACE_MS): a process it left behind cannot hold the attempt open.
 * - `forward = "https://..."`: POSTs the body with the metadata as headers; a 2xx acks, anything
 *   else (or no answer within `timeout_ms`) fails the attempt.
 * - `triage = { model, ... }` with `notify = [...]`: ./triage/handler.ts; acks once the alert, the
 *   model's answer and the deliveries are stored (the deliveries go out on their own).
 * A command's environment is the gateway's, less the variables the config reads secrets from
 * (`env:VAR`), plus the metadata; its stderr is redacted of the config's secrets before it is cut
 * to its tail.
 */
import type { Redact } from "./redact";
import { redactedUrl } from "../config/redact";
import type { JobHandlerConfig } from "../config/webhooks-schema";
import type { JobCall } from "./producer";
import { runTriage, type TriageDeps, type TriageJob } from "./triage/handler";

/** `acked`: the handler acked the call in the transaction of its own last write (a triage job), so the runner does not. */
export type Outcome = { ok: true; acked?: "by the handler" } | { ok: false; error: string };

/** What running a handler needs besides the call. */
export interface HandlerContext {
  /** Where a command's process group is kept while it runs (the runner kills what is left at stop). */
  running: Set<number>;
  /** The environment a command starts with (before the call's metadata). */
  env: Record<string, string | undefined>;
  /** Takes the config's secrets out of text: a command's stderr is redacted before it is cut to its tail. */
  redact: Redact;
  longestSecret: number;
  /** Set when the runner stops: a command it kills then gives its attempt back. */
  stopping: boolean;
  /** Aborted when the grace of a stop has run out: forwards still waiting give their attempts back too. */
  stopped: AbortController;
  triage?: TriageDeps;
}

/** Metadata as environment variables: header names with `-` turned into `_`. */
function metadataEnv(call: JobCall): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(call.metadata)) env[key.replaceAll("-", "_")] = value;
  env.X_GATEWAY_JOB_ID = String(call.jobId);
  env.X_GATEWAY_ATTEMPT = String(call.attempt);
  return env;
}

const STDERR_GRACE_MS = 200;
/** How much of a failed command's stderr is kept (its end) for `last_error`. */
const STDERR_TAIL = 500;

async function runCommand(argv: readonly string[], call: JobCall, timeoutMs: number, context: HandlerContext): Promise<Outcome> {
  const running = context.running;
  let child: Bun.Subprocess<Blob, "ignore", "pipe">;
  try {
    child = Bun.spawn([...argv], {
      stdin: new Blob([call.body]),
      stdout: "ignore",
      stderr: "pipe",
      env: { ...context.env, ...metadataEnv(call) },
      detached: true, // its own process group (pgid = pid), killed whole on timeout
    });
  } catch (error) {
    return { ok: false, error: `cannot start ${argv[0]}: ${(error as Error).message}` };
  }
  const group = child.pid;
  running.add(group);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(group);
  }, timeoutMs);
  const stderr = readTail(child.stderr, context.longestSecret);
  const code = await child.exited;
  clearTimeout(timer);
  running.delete(group);
  if (timedOut) killGroup(group); // anything started after the first kill
  await Promise.race([stderr.ended, Bun.sleep(STDERR_GRACE_MS)]);
  if (code === 0 && !timedOut) return { ok: true };
  const why = timedOut ? `killed (timeout ${timeoutMs} ms)` : child.signalCode ? `killed by ${child.signalCode}` : `exit code ${code}`;
  const tail = context.redact(stderr.text(), { cutBefore: stderr.cut() }).trim().slice(-STDERR_TAIL);
  return { ok: false, error: tail ? `${why}: ${tail}` : why };
}

export function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // already gone
  }
}

/**
 * Reads a stream to its end in the background, keeping only its last characters as text:
 * 2 * STDERR_TAIL plus `margin` (the longest secret, which a cut may leave part of at the start).
 */
function readTail(stream: ReadableStream<Uint8Array>, margin: number): { text: () => string; cut: () => boolean; ended: Promise<void> } {
  let kept = "";
  let cut = false;
  const keep = 2 * STDERR_TAIL + margin;
  const decoder = new TextDecoder();
  const ended = (async () => {
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
      kept += decoder.decode(chunk, { stream: true });
      if (kept.length > keep) {
        kept = kept.slice(-keep);
        cut = true;
      }
    }
  })().catch(() => {});
  return { text: () => kept, cut: () => cut, ended };
}

async function forwardCall(url: string, call: JobCall, timeoutMs: number, stopped: AbortSignal): Promise<Outcome> {
  // A forward URL's user, password, path and query are usually its key: failure reasons are logged
  // and stored, so they name the URL as `config check` shows it.
  const shown = redactedUrl(url, { path: true });
  try {
    const response = await fetch(url, {
      method: "POST",
      body: call.body,
      redirect: "manual",
      signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), stopped]),
      headers: {
        "content-type": call.contentType ?? "application/octet-stream",
        ...call.metadata,
        "X-GATEWAY-JOB-ID": String(call.jobId),
        "X-GATEWAY-ATTEMPT": String(call.attempt),
      },
    });
    await response.body?.cancel();
    return response.ok ? { ok: true } : { ok: false, error: `HTTP ${response.status} from ${shown}` };
  } catch (error) {
    const name = (error as Error)?.name;
    // Bun's messages quote the URL too, normalised (no user, a lower-case host): every URL in them is shown the same way.
    const message = String((error as Error)?.message ?? error).replace(/https?:\/\/[^\s"]+/gi, (found) => redactedUrl(found, { path: true }));
    return { ok: false, error: name === "TimeoutError" ? `no answer from ${shown} within ${timeoutMs} ms` : `${shown}: ${message}` };
  }
}

async function triageCall(handler: TriageJob, call: JobCall, context: HandlerContext): Promise<Outcome> {
  if (!context.triage) return { ok: false, error: "triage jobs need the server's model router (run by `modelgate serve`)" };
  await runTriage(handler, call, context.triage);
  return { ok: true, acked: "by the handler" };
}

export function runHandler(handler: JobHandlerConfig, call: JobCall, context: HandlerContext): Promise<Outcome> {
  if (handler.command) return runCommand(handler.command, call, handler.timeout_ms, context);
  if (handler.triage) return triageCall(handler as TriageJob, call, context);
  return forwardCall(handler.forward!, call, handler.timeout_ms, context.stopped.signal);
}
