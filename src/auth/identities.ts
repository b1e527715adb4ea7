/**
 * Builds identities, credits and rate limits for one server process: the in-memory parts (rate
 * limiter, credit meter, last-used queue, sign-in throttle) and the hourly prune of ended
 * sessions, built once (createIdentityState); and over them, per config, the Gate, built again at
 * each reload (gateFor). The auth controller (routes.ts) is built beside the rest of the app, on
 * the first request that needs it (src/web.ts): this module does not load it. close() flushes what
 * is written behind; serve.ts calls it after the listener has drained.
 *
 * SpendAuth plugs in by passing `spendAuth`; to share the limiter with it, create the limiter
 * first (createMemoryLimiter()) and pass it here too.
 */
import type { Config } from "../config/schema";
import { brieflyLocked, type Db } from "../db/client";
import { postgresOf } from "../db/engine";
import { createMemoryLimiter } from "../ratelimit/memory";
import type { RateLimiter } from "../ratelimit/types";
import { createCreditMeter, type CreditMeter } from "../credits/meter";
import type { Debit } from "../credits/ledger";
import type { Gate, SpendAuthHook } from "./types";
import { createGate } from "./gate";
import { createKeyVerifier } from "./key-verifier";
import type { KeyVerifier } from "./key-check";
import { createLastUsed } from "./key-last-used";
import type { authRoutes } from "./routes";
import { createSignInThrottle } from "./throttle";
import { pruneEndedSessions } from "./session";
import { log } from "../log";

const PRUNE_SESSIONS_EVERY_MS = 3_600_000;
/** The first prune soon after start: a server restarted more often than hourly prunes too. */
const PRUNE_SESSIONS_FIRST_MS = 5_000;

export interface IdentitiesInput {
  db: Db;
  config: Config;
  now: () => number;
  limiter?: RateLimiter;
  spendAuth?: SpendAuthHook;
  /** The first prune of ended sessions, this long after start (default 5 s; tests set 0); then hourly. */
  firstSessionPruneMs?: number;
}

/**
 * The in-memory parts that outlive a config reload: buckets, queued debits and last-used times,
 * sign-in failures, the key check (its cache and database poll), the session prune. `config` is
 * read at each prune (auth.session_days), so the prune follows a reload too.
 */
export interface IdentityState {
  limiter: RateLimiter;
  meter: CreditMeter;
  lastUsed: ReturnType<typeof createLastUsed>;
  throttle: ReturnType<typeof createSignInThrottle>;
  keys: KeyVerifier;
  /** Stops the in-memory parts; the debits still unwritten after retrying for up to `graceMs` (see CreditMeter.close). */
  close(graceMs?: number): Promise<Debit[]>;
}

export interface Identities extends Omit<IdentityState, "lastUsed" | "throttle" | "keys"> {
  gate: Gate;
  routes: ReturnType<typeof authRoutes>;
}

export function createIdentityState(input: Omit<IdentitiesInput, "config" | "spendAuth"> & { config: () => Config }): IdentityState {
  const { db, now } = input;
  const limiter = input.limiter ?? createMemoryLimiter({ now });
  const meter = createCreditMeter(db, { now });
  const lastUsed = createLastUsed(db, now);
  const throttle = createSignInThrottle({ now });
  const keys = createKeyVerifier(db, now);
  const pruneSessions = (): Promise<number> => pruneEndedSessions(db, { now: now(), durationMs: input.config().auth.session_days * 86_400_000 });
  // On SQLite the DELETE runs before pruneEndedSessions returns, so within brieflyLocked's short
  // busy timeout. On Postgres every replica prunes: the DELETE is idempotent, so it takes no lease.
  const guarded = postgresOf(db) === null ? brieflyLocked(db.$client, pruneSessions) : pruneSessions;
  const prune = (): void => {
    guarded().catch((error: unknown) => {
      log("warn", "sessions: prune of ended sessions put off, the database refused it", { error: String((error as Error)?.message ?? error) });
    });
  };
  const first = setTimeout(prune, input.firstSessionPruneMs ?? PRUNE_SESSIONS_FIRST_MS);
  const pruner = setInterval(prune, PRUNE_SESSIONS_EVERY_MS);
  first.unref?.();
  pruner.unref?.();
  return {
    limiter,
    meter,
    lastUsed,
    throttle,
    keys,
    close(graceMs = 0) {
      clearTimeout(first);
      clearInterval(pruner);
      lastUsed.close();
      limiter.close();
      throttle.close();
      return meter.close(graceMs);
    },
  };
}

/** The gate for one config, over the state it shares with the configs before and after it. */
export function gateFor(state: IdentityState, input: Pick<IdentitiesInput, "db" | "config" | "now" | "spendAuth">): Gate {
  const { db, config, now } = input;
  const { limiter, meter, lastUsed, keys } = state;
  return createGate({ db, config, now, limiter, meter, lastUsed, keys, spendAuth: input.spendAuth });
}
