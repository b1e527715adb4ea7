/**
 * Builds identities, credits and rate limits for one server process: the Gate, the auth
 * controller (routes.ts), and the in-memory parts behind them (rate limiter, credit meter,
 * last-used queue, sign-in throttle). close() flushes what is written behind; serve.ts calls it
 * after the listener has drained.
 *
 * SpendAuth plugs in by passing `spendAuth`; to share the limiter with it, create the limiter
 * first (createMemoryLimiter()) and pass it here too.
 */
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import type { GatewayError } from "../errors";
import { createMemoryLimiter } from "../ratelimit/memory";
import type { RateLimiter } from "../ratelimit/types";
import { createCreditMeter, type CreditMeter } from "../credits/meter";
import type { Debit } from "../credits/ledger";
import type { Admission, AdmitInput, Gate } from "./types";
import { createGate } from "./gate";
import { createLastUsed } from "./apikey";
import { authRoutes } from "./routes";
import { createSignInThrottle } from "./throttle";

export interface IdentitiesInput {
  db: Db;
  config: Config;
  now: () => number;
  limiter?: RateLimiter;
  spendAuth?: (input: AdmitInput) => Promise<Admission | GatewayError>;
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
  return {
    gate,
    routes: authRoutes({ db, config, now, throttle }),
    limiter,
    meter,
    close(graceMs = 0) {
      lastUsed.close();
      limiter.close();
      throttle.close();
      return meter.close(graceMs);
    },
  };
}
