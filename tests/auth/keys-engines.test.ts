// API keys' data access and the request path's key check, each run on SQLite and on a real
// PostgreSQL 15 (a fresh database per test): create, list, policy update and revocation by id and
// by the key itself; verification and its cache; the keys_per_user cap under creates racing on
// several connections; the last_used_at batch; and a revocation or policy change made through
// another handle (the CLI, another replica) reaching a running verifier within its bound.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { createApiKey, listApiKeys, revokeApiKey } from "../../src/auth/apikey";
import { createLastUsed } from "../../src/auth/key-last-used";
import { createKeyWithinCap, resolveKeyId, updateKeyPolicy } from "../../src/auth/key-updates";
import { createKeyVerifier } from "../../src/auth/key-verifier";
import type { Db } from "../../src/db/client";
import { tablesOf } from "../../src/db/engine";
import { openStorage, type OpenedStorage } from "../../src/db/open";
import { eventually } from "../support/eventually";
import { startPostgres, type RunningPostgres } from "../support/postgres";

let pg: RunningPostgres;
let databases = 0;
const opened: OpenedStorage[] = [];
beforeAll(async () => {
  pg = await startPostgres();
});
afterEach(async () => {
  for (const storage of opened.splice(0)) await storage.close();
});
afterAll(async () => {
  await pg?.stop();
});

/** Two handles on one fresh database: the server's and another process's (the CLI, a replica). */
type Fresh = () => Promise<{ db: Db; other: Db }>;

async function open(options: { dataDir: string; url?: string; poolSize?: number }): Promise<Db> {
  const storage = await openStorage(options);
  opened.push(storage);
  return storage.db;
}

const engines: Array<[string, Fresh]> = [
  [
    "sqlite",
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), "modelgate-keys-"));
      return { db: await open({ dataDir }), other: await open({ dataDir }) };
    },
  ],
  [
    "postgres",
    async () => {
      const url = await pg.createDatabase(`keys_${++databases}`);
      return { db: await open({ dataDir: "unused", url, poolSize: 4 }), other: await open({ dataDir: "unused", url, poolSize: 4 }) };
    },
  ],
];

async function addUser(db: Db, email: string): Promise<number> {
  const { users } = tablesOf(db);
  const [user] = await db.insert(users).values({ email }).returning({ id: users.id });
  return user.id;
}

describe.each(engines)("on %s", (engine, fresh) => {
  test("a key is created, listed without its secret, its policy changed, and revoked by id or by the key itself", async () => {
    const { db } = await fresh();
    const ann = await addUser(db, "ann@example.com");
    const bob = await addUser(db, "bob@example.com");
    const first = await createApiKey(db, { userId: ann, name: "laptop", now: 1_000, policy: { models: "llama*", perMinute: 5 } });
    const second = await createApiKey(db, { userId: ann, name: "ci", now: 2_000, expiresAt: 9_000_000 });
    const listed = await listApiKeys(db, { userId: ann });
    expect(listed.map((k) => k.id)).toEqual([second.id, first.id]);
    expect(listed[1]).toMatchObject({ name: "laptop", email: "ann@example.com", models: "llama*", perMinute: 5, createdAt: 1_000, revokedAt: null });
    expect(listed[0]).toMatchObject({ expiresAt: 9_000_000, models: null, ownerDisabledAt: null });
    expect(JSON.stringify(listed)).not.toContain(first.key.slice(12));
    expect(await listApiKeys(db, { userId: bob })).toEqual([]);

    expect(await updateKeyPolicy(db, first.id, { budgetMicro: 5_000_000, budgetPeriod: "day", models: null }, { userId: bob })).toBe("not_found");
    expect(await updateKeyPolicy(db, first.id, { budgetMicro: 5_000_000, budgetPeriod: "day", models: null }, { userId: ann })).toBe("updated");
    expect((await listApiKeys(db)).find((k) => k.id === first.id)).toMatchObject({ budgetMicro: 5_000_000, budgetPeriod: "day", models: null, perMinute: 5 });
    expect(await updateKeyPolicy(db, "key_nope", { perMinute: 1 })).toBe("not_found");

    expect(await resolveKeyId(db, first.id)).toBe(first.id);
    expect(await resolveKeyId(db, second.key)).toBe(second.id);
    expect(await resolveKeyId(db, "key_nope")).toBeNull();
    expect(await resolveKeyId(db, `${second.key.slice(0, -1)}x`)).toBeNull();

    expect(await revokeApiKey(db, first.id, { userId: bob })).toBe("not_found");
    expect(await revokeApiKey(db, first.id, { now: 5_000 })).toBe("revoked");
    expect(await revokeApiKey(db, first.id)).toBe("already_revoked");
    expect(await revokeApiKey(db, (await resolveKeyId(db, second.key))!, { userId: ann, now: 6_000 })).toBe("revoked");
    expect((await listApiKeys(db)).map((k) => k.revokedAt)).toEqual([6_000, 5_000]);
  });

  test("a verified key is kept, the same object for every request, and refused once this process revokes it", async () => {
    const { db } = await fresh();
    const ann = await addUser(db, "ann@example.com");
    let clock = 1_000_000;
    const { id, key } = await createApiKey(db, { userId: ann, name: "n", policy: { models: "small*" }, expiresAt: 2_000_000 });
    const { key: other } = await createApiKey(db, { userId: ann, name: "other" });
    const verifier = createKeyVerifier(db, () => clock);
    const [a, b] = await Promise.all([verifier.verify(key), verifier.verify(key)]);
    expect(a).toMatchObject({ ok: true, identity: { kind: "api_key", userId: ann, keyId: id, subject: `key:${id}` } });
    expect(b).toBe(a); // requests at once share one read
    // Kept: at once on SQLite; on Postgres once the change poll has read its counter the first time.
    const keptTwice = async (): Promise<boolean> => {
      const once = await verifier.verify(key);
      return (await verifier.verify(key)) === once;
    };
    expect(await eventually(keptTwice)).toBe(true);
    if (!a.ok) throw new Error("refused");
    expect(a.policy?.allowsModel?.({ id: "small-1", aliases: [] })).toBe(true);
    expect(a.policy?.allowsModel?.({ id: "big-1", aliases: [] })).toBe(false);
    expect(await verifier.verify(`${key.slice(0, 6)}${"a".repeat(46)}`)).toMatchObject({ ok: false });

    expect(await revokeApiKey(db, id)).toBe("revoked");
    expect(await verifier.verify(key)).toMatchObject({ ok: false, message: "The API key has been revoked" });
    expect(await verifier.verify(other)).toMatchObject({ ok: true });
    clock = 2_000_000;
    expect(await verifier.verify(other)).toMatchObject({ ok: true });
    const { key: expiring } = await createApiKey(db, { userId: ann, name: "e", expiresAt: 2_000_000 });
    expect(await verifier.verify(expiring)).toMatchObject({ ok: false, message: expect.stringContaining("expired") });
  });

  test("keys_per_user holds when creates race on several connections", async () => {
    const { db, other } = await fresh();
    // On SQLite, one connection per process: its transactions take turns. A second connection in the
    // same process would wait for the write lock with the event loop, and so the first, stopped.
    const handles = engine === "sqlite" ? [db] : [db, other];
    const ann = await addUser(db, "ann@example.com");
    const bob = await addUser(db, "bob@example.com");
    await createApiKey(db, { userId: bob, name: "bob's" });
    const { id: revoked } = await createApiKey(db, { userId: ann, name: "old" });
    await revokeApiKey(db, revoked);
    const created = await Promise.all(
      Array.from({ length: 12 }, (_, i) => createKeyWithinCap(handles[i % handles.length], { userId: ann, name: `k${i}` }, { keysPerUser: 3 })),
    );
    expect(created.filter((k) => k !== null)).toHaveLength(3);
    expect((await listApiKeys(db, { userId: ann })).filter((k) => k.revokedAt === null)).toHaveLength(3);
    expect(await createKeyWithinCap(db, { userId: bob, name: "second" }, { keysPerUser: 3 })).not.toBeNull();
  });

  test("last_used_at is written behind in one batch, at most once a minute per key", async () => {
    const { db } = await fresh();
    const ann = await addUser(db, "ann@example.com");
    const keys = await Promise.all([1, 2, 3].map((i) => createApiKey(db, { userId: ann, name: `k${i}` })));
    let clock = 10_000_000;
    const lastUsed = createLastUsed(db, () => clock);
    const { apiKeys } = tablesOf(db);
    const read = async (): Promise<Array<number | null>> => {
      const rows = await db.select({ id: apiKeys.id, at: apiKeys.lastUsedAt }).from(apiKeys);
      return keys.map((k) => rows.find((r) => r.id === k.id)?.at ?? null);
    };
    for (const k of keys) lastUsed.touch(k.id);
    expect(await read()).toEqual([null, null, null]); // nothing written on the request path
    lastUsed.flush();
    expect(await eventually(async () => (await read()).every((at) => at === 10_000_000))).toBe(true);
    clock += 59_999;
    lastUsed.touch(keys[0].id);
    clock += 1;
    lastUsed.touch(keys[1].id);
    lastUsed.close();
    expect(await eventually(async () => (await read())[1] === 10_060_000)).toBe(true);
    expect((await read())[0]).toBe(10_000_000);
  });

  test("a revocation or policy change made through another handle reaches a running verifier within a second", async () => {
    const { db, other } = await fresh();
    const ann = await addUser(db, "ann@example.com");
    const first = await createApiKey(db, { userId: ann, name: "a" });
    const second = await createApiKey(db, { userId: ann, name: "b" });
    const verifier = createKeyVerifier(db, Date.now);
    expect(await verifier.verify(first.key)).toMatchObject({ ok: true });
    expect(await verifier.verify(second.key)).toMatchObject({ ok: true, policy: null });
    // The poll's baseline is taken, so what follows is a change it must notice.
    await Bun.sleep(1_100);
    expect(await revokeApiKey(other, first.id)).toBe("revoked");
    expect(await updateKeyPolicy(other, second.id, { models: "small*" })).toBe("updated");
    const started = Date.now();
    const seen = async (): Promise<boolean> => {
      const revoked = await verifier.verify(first.key);
      const changed = await verifier.verify(second.key);
      return !revoked.ok && changed.ok && changed.policy?.allowsModel?.({ id: "big-1", aliases: [] }) === false;
    };
    expect(await eventually(seen, 3_000)).toBe(true);
    // The documented bound is one second plus one round trip; the margin is for a loaded machine.
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test("an owner disabled through another handle is refused within a second", async () => {
    const { db, other } = await fresh();
    const ann = await addUser(db, "ann@example.com");
    const { key } = await createApiKey(db, { userId: ann, name: "a" });
    const verifier = createKeyVerifier(db, Date.now);
    expect(await verifier.verify(key)).toMatchObject({ ok: true });
    await Bun.sleep(1_100);
    const { users } = tablesOf(other);
    await other.update(users).set({ disabledAt: Date.now() }).where(eq(users.id, ann));
    expect(await eventually(async () => !(await verifier.verify(key)).ok, 3_000)).toBe(true);
    expect(await verifier.verify(key)).toMatchObject({ message: "The account that owns this API key is disabled" });
  });
});

test("on postgres, last_used_at written by another replica leaves the key cache as it is", async () => {
  const { db, other } = await engines[1][1]();
  const ann = await addUser(db, "ann@example.com");
  const { id, key } = await createApiKey(db, { userId: ann, name: "a" });
  const verifier = createKeyVerifier(db, Date.now);
  await Bun.sleep(1_100); // past the poll's first read, which empties what was cached before it
  const verified = await verifier.verify(key);
  expect(verified).toMatchObject({ ok: true });
  const lastUsed = createLastUsed(other, Date.now);
  lastUsed.touch(id);
  lastUsed.close();
  const { apiKeys } = tablesOf(other);
  expect(await eventually(async () => (await other.select({ at: apiKeys.lastUsedAt }).from(apiKeys))[0].at !== null)).toBe(true);
  await Bun.sleep(1_100);
  expect(await verifier.verify(key)).toBe(verified);
});
