/**
 * `[cluster] redis_url`: what one process would hold in memory, held in Redis for every replica.
 *   - the rate limiter (../ratelimit/redis.ts): token buckets and the anonymous daily window;
 *   - SpendAuth's replay records (../spendauth/shared-nonces.ts, given `link` by serve.ts);
 *   - key changes fanned out on KEYS_CHANNEL: this process publishes each change it makes
 *     (../auth/apikey.ts forgetVerifiedKeys), and empties its key cache on each one published,
 *     by another replica or by the CLI, and whenever the link comes back (messages sent while it
 *     was down are lost). A shared SQLite file's data_version poll (../auth/key-verifier.ts) would
 *     notice too; the channel is what reaches replicas on another host.
 * Redis down: limits refuse (503), /api/status says so; the link dials again by itself.
 */
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { onKeysChanged, verifiedKeyCache } from "../auth/apikey";
import { createRedisLimiter } from "../ratelimit/redis";
import type { RateLimiter } from "../ratelimit/types";
import { createRedisLink, describeRedisUrl, type RedisLink } from "./redis";

export const KEYS_CHANNEL = "modelgate:keys";

export interface Cluster {
  link: RedisLink;
  limiter: RateLimiter;
  /** The `cluster` section of /api/status; with Redis down, the status is "degraded". */
  statusSection(): Record<string, unknown>;
  close(): void;
}

type Log = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export async function startCluster(config: Config, options: { db: Db; log: Log }): Promise<Cluster> {
  const url = config.cluster.redis_url!;
  const where = describeRedisUrl(url);
  const link = createRedisLink(url, { timeoutMs: config.cluster.redis_timeout_ms });
  const { db, log } = options;
  const forgetKeys = (): void => verifiedKeyCache(db).clear();
  link.subscribe(KEYS_CHANNEL, forgetKeys);
  link.onDown((reason) => log("error", `cluster: Redis at ${where} stopped answering; requests are refused (503) until it answers again`, { error: reason }));
  link.onReconnect(() => {
    forgetKeys();
    log("info", `cluster: Redis at ${where} is back; shared rate limits apply again`);
  });
  onKeysChanged(db, "cluster", () => {
    link.send("PUBLISH", [KEYS_CHANNEL, "changed"]).catch((error) => {
      log("warn", "cluster: a key change could not be published; replicas sharing this database notice it within a moment, others when Redis returns", {
        error: String((error as Error)?.message ?? error),
      });
    });
  });
  try {
    await link.ready();
    log("info", `cluster: rate limits, replay records and key changes are shared through Redis at ${where}`);
  } catch (error) {
    log("error", `cluster: Redis at ${where} cannot be reached; requests are refused (503) until it can, and the gateway keeps trying`, {
      error: String((error as Error)?.message ?? error),
    });
  }
  return {
    link,
    limiter: createRedisLimiter(link),
    // /api/status is public: whether Redis answers and since when, not where it is or what it said (the log has both).
    statusSection() {
      const redis = link.status();
      const cluster = { redis: redis.connected ? "up" : "down", down_since: redis.down_since === null ? null : new Date(redis.down_since).toISOString() };
      return redis.connected ? { cluster } : { status: "degraded", cluster };
    },
    close: () => link.close(),
  };
}

/** Tells every replica to forget its cached keys: what `key revoke` and `key update` do from the CLI. */
export async function publishKeyChange(url: string, options: { timeoutMs: number }): Promise<void> {
  const link = createRedisLink(url, options);
  try {
    await link.ready();
    await link.send("PUBLISH", [KEYS_CHANNEL, "changed"]);
  } finally {
    link.close();
  }
}
