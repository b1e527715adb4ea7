/**
 * Wires SpendAuth for the server: the verification hook for the Gate, the chain client (with
 * rpc_url), the settlement worker (with operator_key; one process at a time holds its lease
 * where several share the database), nonce pruning, and the /api/status section. Config problems
 * are ConfigErrors naming the key, raised before the server listens.
 */
import { ConfigError } from "../config/load";
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { createLease, processHolder } from "../db/lease";
import { keepLease } from "../db/lease-keeper";
import { IdentifiedDenial, type SpendAuthHook } from "../auth/types";
import type { GatewayError } from "../errors";
import type { RateDecision, RateLimiter } from "../ratelimit/types";
import { limitsUnavailable, policyFromLimit, rateLimitHeaders } from "../ratelimit/types";
import type { RedisCommands } from "../ratelimit/redis";
import { createSharedNonces } from "./shared-nonces";
import { createSpendAuth, spendAuthMode, type SpendRateLimit } from "./admit";
import { spendAuthIdentity } from "./admission";
import { createNonceStore } from "./nonces";
import { Reservations } from "./reservations";
import { cachedAccountReader, createAccountReader, createPublic, createSettler, operatorKeyAddress, type AccountReader } from "./chain";
import { loadReservations, settlementCounts } from "./settlements";
import { createSettlementWriter, type SettlementWriter } from "./settlement-writer";
import { startSettlementWorker, type SettlementWorker } from "./worker";

export interface SpendAuthRuntime {
  hook: SpendAuthHook;
  mode: ReturnType<typeof spendAuthMode>;
  settling: boolean;
  statusSection: () => Promise<Record<string, unknown>>;
  worker: SettlementWorker | null;
  /** Served authorizations, written to the settlements table as they are answered. */
  settlements: SettlementWriter;
  /** Writes the settlements the database refused earlier (retrying for up to shutdown_grace_ms) and stops the worker; resolves to how many could not be written. */
  stop(): Promise<number>;
}

export interface SpendAuthSetupOptions {
  config: Config;
  db: Db;
  now: () => number;
  /** The gateway's limiter; SpendAuth takes limits.spend_auth from it per commitment. */
  limiter?: RateLimiter;
  /** `[cluster] redis_url`'s connection: replay records are kept there too, for every replica. */
  redis?: RedisCommands;
  log: (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;
  /** This process among those sharing the database (../db/lease.ts processHolder by default). */
  holder?: string;
}

const PRUNE_INTERVAL_MS = 60_000;
/** The settlement worker's lease: renewed every 10 s, taken over 30 s after its holder died. */
const WORKER_LEASE_MS = 30_000;

/** `spend_auth.operator_key` must control `spend_auth.operator` (only the named operator can claim); `config check` asks this too. */
export function checkOperatorKey(cfg: Config["spend_auth"]): void {
  if (!cfg.operator_key) return;
  const address = operatorKeyAddress(cfg.operator_key);
  if (!address) throw new ConfigError("spend_auth.operator_key: not a 32-byte hex private key");
  if (cfg.operator && address !== cfg.operator.toLowerCase()) {
    throw new ConfigError(
      `spend_auth.operator_key: controls ${address}, not spend_auth.operator ${cfg.operator.toLowerCase()} (only the named operator can claim)`,
    );
  }
}

export async function setupSpendAuth(options: SpendAuthSetupOptions): Promise<SpendAuthRuntime> {
  const cfg = options.config.spend_auth;
  const mode = spendAuthMode(options.config);
  checkOperatorKey(cfg);
  const nonces = createNonceStore(options.db);
  try {
    const forgotten = await nonces.forgetUnsettled();
    if (forgotten > 0)
      options.log(
        "warn",
        `spend_auth: ${forgotten} authorization(s) admitted before the last stop have no settlement row of their own (the process died before writing it); their nonces are the clients' again`,
      );
  } catch (error) {
    options.log("warn", "spend_auth: could not forget unsettled nonces, the database refused it; they expire by themselves", {
      error: String((error as Error)?.message ?? error),
    });
  }
  const settlements = createSettlementWriter(options.db, { now: options.now });
  const reservations = new Reservations();
  await loadReservations(options.db, reservations);
  let accounts: AccountReader | undefined;
  let worker: SettlementWorker | null = null;
  if (mode === "chain") {
    const chainOptions = { rpcUrl: cfg.rpc_url!, chainId: cfg.chain_id, contract: cfg.verifying_contract as `0x${string}`, timeoutMs: cfg.rpc_timeout_ms };
    const client = createPublic(chainOptions);
    accounts = cachedAccountReader(createAccountReader(client, chainOptions.contract), { ttlMs: cfg.account_cache_ms, now: options.now });
    client.getChainId().then(
      (id) =>
        id !== cfg.chain_id &&
        options.log("error", `spend_auth: the RPC reports chain ${id}, but spend_auth.chain_id is ${cfg.chain_id}; authorizations will not settle`),
      (err) => options.log("warn", "spend_auth: the RPC did not answer at start-up", { error: String((err as Error)?.message ?? err).split("\n")[0] }),
    );
    if (cfg.operator_key) {
      const settler = createSettler(client, { ...chainOptions, operatorKey: cfg.operator_key });
      const workerLease = { ttlMs: WORKER_LEASE_MS, now: options.now };
      worker = startSettlementWorker({
        db: options.db,
        settler,
        reservations,
        accounts,
        now: options.now,
        intervalMs: cfg.settle_interval_ms,
        maxAttempts: cfg.settle_max_attempts,
        log: options.log,
        beforeTick: settlements.flush,
        lease: keepLease(createLease(options.db, "settlement-worker", { ...workerLease, holder: options.holder ?? processHolder() }), workerLease),
      });
    }
  }
  const hook = createSpendAuth({
    db: options.db,
    config: options.config,
    now: options.now,
    accounts,
    rateLimit: options.limiter && commitmentLimit(options.limiter, options.config),
    nonces,
    sharedNonces: options.redis && createSharedNonces(options.redis),
    reservations,
    settlements,
  });
  const pruner = setInterval(() => {
    reservations.sweep(options.now());
    nonces.prune(options.now()).catch((error: unknown) => {
      options.log("warn", "spend_auth: nonce prune put off, the database refused it", { error: String((error as Error)?.message ?? error) });
    });
  }, PRUNE_INTERVAL_MS);
  pruner.unref?.();
  return {
    hook,
    mode,
    settling: worker !== null,
    worker,
    settlements,
    statusSection: async () => ({ spend_auth: { mode, settling: worker !== null, settlements: await settlementCounts(options.db) } }),
    async stop() {
      clearInterval(pruner);
      const unwritten = await settlements.closeWithin(options.config.server.shutdown_grace_ms);
      if (unwritten > 0) options.log("error", `spend_auth: ${unwritten} served authorization(s) could not be written before the stop and will not be settled`);
      await worker?.stop();
      return unwritten;
    },
  };
}

/** limits.spend_auth per commitment, through the shared limiter (x-ratelimit-* headers included). */
export function commitmentLimit(limiter: RateLimiter, config: Pick<Config, "limits">): SpendRateLimit {
  const policy = policyFromLimit(config.limits.spend_auth);
  const decided = (commitment: string, decision: RateDecision): Record<string, string> | GatewayError => {
    const headers = rateLimitHeaders(decision);
    if (decision.allowed) return headers;
    return new IdentifiedDenial(
      spendAuthIdentity(commitment),
      "rate_limit_exceeded",
      `Rate limit reached for this commitment: ${decision.limit} requests per ${decision.binding === "bucket" ? "minute" : "day"}; retry after ${headers["retry-after"]} s with the same authorization`,
      { headers },
    );
  };
  return (commitment) => {
    const decision = limiter.take(`commitment:${commitment}`, policy);
    if (decision instanceof Promise)
      return decision.then(
        (d) => decided(commitment, d),
        () => limitsUnavailable(),
      );
    return decided(commitment, decision);
  };
}
