/**
 * `[cluster]` in process against a real redis-server: the config key (a secret: redacted in
 * `config check`), the key-change fan-out over pub/sub (published by this process's own changes,
 * and by the CLI's publishKeyChange, emptying every subscriber's key cache, not only through the
 * shared database's poll), and the /api/status section while Redis is up and down.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load";
import { redactedConfig } from "../../src/config/redact";
import { openDatabase } from "../../src/db/client";
import { forgetVerifiedKeys, verifiedKeyCache, type VerifiedKey } from "../../src/auth/apikey";
import { KEYS_CHANNEL, publishKeyChange, startCluster } from "../../src/cluster";
import { startRedis, type RunningRedis } from "../support/redis";
import { eventually } from "../support/eventually";

let redis: RunningRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

const quiet = (): void => {};

describe("[cluster] redis_url", () => {
  test("absent by default; accepts env:, refuses a URL that is not Redis's, and config check redacts it", () => {
    expect(buildConfig({}).config.cluster).toEqual({ redis_timeout_ms: 1_000 });
    const loaded = buildConfig({ cluster: { redis_url: "env:REDIS_URL" } }, { env: { REDIS_URL: "redis://:hunter2hunter2@cache:6379" } });
    expect(loaded.config.cluster.redis_url).toBe("redis://:hunter2hunter2@cache:6379");
    expect(JSON.stringify(redactedConfig(loaded))).not.toContain("hunter2");
    expect((redactedConfig(loaded) as { cluster: { redis_url: string } }).cluster.redis_url).toBe("<redacted>");
    expect(() => buildConfig({ cluster: { redis_url: "http://cache:6379" } })).toThrow(/cluster\.redis_url/);
  });

  test("a key change made here, or published by the CLI, empties every replica's key cache", async () => {
    const config = buildConfig({ cluster: { redis_url: redis.url } }).config;
    const here = openDatabase(":memory:");
    const there = openDatabase(":memory:");
    const clusters = [await startCluster(config, { db: here.db, log: quiet }), await startCluster(config, { db: there.db, log: quiet })];
    const cached = { ok: true } as unknown as VerifiedKey;
    verifiedKeyCache(there.db).set("hash", cached);
    forgetVerifiedKeys(here.db);
    expect(await eventually(() => verifiedKeyCache(there.db).size === 0)).toBe(true);

    verifiedKeyCache(here.db).set("hash", cached);
    verifiedKeyCache(there.db).set("hash", cached);
    await publishKeyChange(redis.url, { timeoutMs: 1_000 });
    expect(await eventually(() => verifiedKeyCache(here.db).size === 0 && verifiedKeyCache(there.db).size === 0)).toBe(true);
    for (const cluster of clusters) cluster.close();
    here.close();
    there.close();
  });

  test("/api/status says degraded while Redis is down, and up again once it is back", async () => {
    const config = buildConfig({ cluster: { redis_url: redis.url, redis_timeout_ms: 200 } }).config;
    const db = openDatabase(":memory:");
    const cluster = await startCluster(config, { db: db.db, log: quiet });
    expect(cluster.statusSection()).toEqual({ cluster: { redis: "up", down_since: null } });
    await redis.stop();
    expect(await eventually(() => (cluster.statusSection() as { status?: string }).status === "degraded")).toBe(true);
    await expect(cluster.limiter.take("key:x", { limit: 1, periodMs: 60_000 })).rejects.toThrow(/Redis/);
    await redis.start();
    expect(await eventually(() => (cluster.statusSection() as { cluster: { redis: string } }).cluster.redis === "up", 5_000)).toBe(true);
    expect((await cluster.limiter.take("key:x", { limit: 1, periodMs: 60_000 })).allowed).toBe(true);
    // Subscribed again on the new connection.
    const client = await redis.client();
    expect(Number(await client.send("PUBSUB", ["NUMSUB", KEYS_CHANNEL]).then((r: unknown[]) => r[1]))).toBe(1);
    cluster.close();
    db.close();
  });
});
