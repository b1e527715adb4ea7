/**
 * Builds identities, credits and rate limits for one server process: the Gate, the auth
 * controller (routes.ts), and the in-memory parts behind them (rate limiter, credit meter,
 * last-used queue, sign-in throttle) and the hourly prune of ended sessions. close() flushes what
 * is written behind; serve.ts calls it after the listener has drained.
 *
 * SpendAuth plugs in by passing `spendAuth`; to share the limiter with it, create the limiter
 * first (createMemoryLimiter()) and pass it here too.
 */
import type { Config } from "../config/schema";
import { brieflyLocked, type Db } from "../db/client";
import { createMemoryLimiter } from "../ratelimit/memory";
import type { RateLimiter } from "../ratelimit/types";
import { createCreditMeter, type CreditMeter } from "../credits/meter";
import type { Debit } from "../credits/ledger";
import type { Gate, SpendAuthHook } from "./types";
import { createGate } from "./gate";
import { createLastUsed } from "./apikey";
import { authRoutes } from "./routes";
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

export interface Identities {
  gate: Gate;
  routes: ReturnType<typeof authRoutes>;
  limiter: RateLimiter;
  meter: CreditMeter;
  /** Stops the in-memory parts; the debits still unwritten after retrying for up to `graceMs` (see CreditMeter.close). */
  close(graceMs?: number): Promise<Debit[]>;
}

export function buildIdentities(input: IdentitiesInput): Identities {
  const { db, config, now } = input;
  const limiter = input.limiter ?? createMemoryLimiter({ now });
  const meter = createCreditMeter(db, { now });
  const lastUsed = createLastUsed(db, now);
  const throttle = createSignInThrottle({ now });
  const gate = createGate({ db, config, now, limiter, meter, lastUsed, spendAuth: input.spendAuth });
  const pruneSessions = brieflyLocked(db.$client, () => pruneEndedSessions(db, { now: now(), durationMs: config.auth.session_days * 86_400_000 }));
  const prune = (): void => {
    try {
      pruneSessions();
    } catch (error) {
      log("warn", "sessions: prune of ended sessions put off, the database refused it", { error: String((error as Error)?.message ?? error) });
    }
  };
  const first = setTimeout(prune, input.firstSessionPruneMs ?? PRUNE_SESSIONS_FIRST_MS);
  const pruner = setInterval(prune, PRUNE_SESSIONS_EVERY_MS);
  first.unref?.();
  pruner.unref?.();
  return {
    gate,
    routes: authRoutes({ db, config, now, throttle }),
    limiter,
    meter,
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
