/**
 * The route memory over a real database file: what a poll listed is served after a "restart" (a
 * new registry on the same database), in the upstream's order; a write the database refuses
 * (another process holds its write lock) is logged and made after the next poll; upstreams that
 * do not discover are never restored.
 */
import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { ModelRegistry } from "../../src/router/registry";
import { createRouteMemory } from "../../src/router/remembered-routes";
import { ConfigSchema } from "../../src/config/schema";
import { Value } from "@sinclair/typebox/value";
import type { Config } from "../../src/config/schema";

function config(): Config {
  return Value.Default(ConfigSchema, {
    upstreams: [
      { name: "box", base_url: "http://127.0.0.1:9/v1", discover: true },
      { name: "fixed", base_url: "http://127.0.0.1:9/v1" },
    ],
  }) as Config;
}

test("remembered across a restart, in order; a refused write is logged and made after the next poll", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-route-memory-"));
  const cfg = config();
  const lines: string[] = [];
  const log = (level: string, msg: string): void => void lines.push(`${level} ${msg}`);
  const first = openDatabase(dir);
  const memory = createRouteMemory(first.db, { now: () => 1_000, log });
  await memory.restore(new ModelRegistry(cfg), cfg.upstreams);
  await memory.remember("box", ["zeta", "alpha"]);

  // Another process holds the write lock: the write is refused, said once, and kept for later.
  const other = new Database(join(dir, "modelgate.db"));
  other.run("BEGIN IMMEDIATE");
  await memory.remember("box", ["zeta", "alpha", "beta"]);
  expect(lines.filter((l) => l.startsWith("warn "))).toHaveLength(1);
  expect(lines.at(-1)).toStartWith('warn discovery: could not remember the routes of upstream "box" (tried again after its next poll)');
  other.run("ROLLBACK");
  other.close();
  await memory.remember("box", ["zeta", "alpha", "beta"]);
  first.close();

  const second = openDatabase(dir);
  const registry = new ModelRegistry(cfg);
  await createRouteMemory(second.db, { now: () => 2_000, log }).restore(registry, cfg.upstreams);
  expect(registry.list().map((r) => [r.id, r.source, r.ownedBy])).toEqual([
    ["zeta", "discovered", "box"],
    ["alpha", "discovered", "box"],
    ["beta", "discovered", "box"],
  ]);
  expect(lines.at(-1)).toBe('info serving 3 remembered route(s) of upstream "box" until its discovery answers');
  second.close();
});
