/**
 * Discovery where replicas share one database, on SQLite (two connections to one file) and on a
 * real Postgres (two pools): only the holder of the discovery lease polls the upstream and writes
 * what it lists; the other serves those routes from the database; once the holder stops, the
 * other leads. The remembered routes round-trip on either engine, in the upstream's order.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { Value } from "@sinclair/typebox/value";
import { ConfigSchema, type Config } from "../../src/config/schema";
import { openDatabase, type Db } from "../../src/db/client";
import { openStorage, type OpenedStorage } from "../../src/db/open";
import { startDiscovery } from "../../src/router/discover";
import { ModelRegistry } from "../../src/router/registry";
import { createRouteMemory } from "../../src/router/remembered-routes";
import { startPostgres, type RunningPostgres } from "../support/postgres";

let pg: RunningPostgres;
/** An upstream that lists three models and counts the lists it gave. */
let upstream: { url: string; stop(): void };
let modelLists = 0;
const closers: Array<() => Promise<void> | void> = [];
beforeAll(async () => {
  pg = await startPostgres();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => {
      modelLists += 1;
      return Response.json({ object: "list", data: ["zeta", "alpha", "beta"].map((id) => ({ id, object: "model" })) });
    },
  });
  upstream = { url: `http://127.0.0.1:${server.port}/v1`, stop: () => server.stop(true) };
});
afterAll(async () => {
  for (const close of closers) await close();
  upstream?.stop();
  await pg?.stop();
});

let databases = 0;
/** Two handles on one fresh database of the engine, as two replicas have. */
const engines: Array<[string, () => Promise<[Db, Db]>]> = [
  [
    "sqlite",
    async () => {
      const dir = mkdtempSync(`${tmpdir()}/modelgate-discovery-`);
      const [a, b] = [openDatabase(dir), openDatabase(dir)];
      closers.push(a.close, b.close);
      return [a.db, b.db];
    },
  ],
  [
    "postgres",
    async () => {
      const url = await pg.createDatabase(`discovery_${databases++}`);
      const handles: OpenedStorage[] = [await openStorage({ dataDir: "unused", url, poolSize: 2 }), await openStorage({ dataDir: "unused", url, poolSize: 2 })];
      closers.push(...handles.map((h) => h.close));
      return [handles[0].db, handles[1].db];
    },
  ],
];

function config(): Config {
  return Value.Default(ConfigSchema, {
    upstreams: [{ name: "box", base_url: upstream.url, discover: true, discover_interval_s: 3600 }],
  }) as Config;
}

/** One replica: its registry, route memory and discovery polls. */
function replica(db: Db, holder: string) {
  const cfg = config();
  const registry = new ModelRegistry(cfg);
  const memory = createRouteMemory(db, { now: Date.now, log: () => {}, holder });
  const discovery = startDiscovery(registry, cfg.upstreams, {
    log: () => {},
    discovered: memory.remember,
    shared: { leads: memory.leads, follow: (u) => memory.follow(registry, u) },
  });
  closers.push(discovery.stop);
  return { cfg, registry, memory, discovery };
}

describe.each(engines)("discovery on %s", (_engine, open) => {
  test("only the lease's holder polls and writes; the other serves what it wrote, and leads once the holder stops", async () => {
    const [a, b] = await open();
    const before = modelLists;
    const leader = replica(a, "replica-a");
    await leader.discovery.ready;
    const follower = replica(b, "replica-b");
    await follower.discovery.ready;
    expect(modelLists - before).toBe(1);
    expect(leader.registry.discoveredIds("box")).toEqual(["zeta", "alpha", "beta"]);
    expect(follower.registry.discoveredIds("box")).toEqual(["zeta", "alpha", "beta"]);
    expect(await follower.memory.leads()).toBe(false);

    leader.discovery.stop();
    await leader.memory.close();
    expect(await follower.memory.leads()).toBe(true);
    await follower.memory.close();
  });

  test("remembered routes round-trip: a restarted replica serves them in the upstream's order before any poll", async () => {
    const [a, b] = await open();
    const cfg = config();
    const first = createRouteMemory(a, { now: () => 1_000, log: () => {} });
    await first.restore(new ModelRegistry(cfg), cfg.upstreams);
    await first.remember("box", ["zeta", "alpha"]);
    await first.remember("box", ["zeta", "alpha", "beta"]);
    const registry = new ModelRegistry(cfg);
    await createRouteMemory(b, { now: () => 2_000, log: () => {} }).restore(registry, cfg.upstreams);
    expect(registry.list().map((r) => [r.id, r.source, r.ownedBy])).toEqual([
      ["zeta", "discovered", "box"],
      ["alpha", "discovered", "box"],
      ["beta", "discovered", "box"],
    ]);
  });
});
