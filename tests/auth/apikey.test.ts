import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { createUser } from "../../src/auth/users";
import { createApiKey, generateApiKey, listApiKeys, parseApiKey, revokeApiKey } from "../../src/auth/apikey";
import { createLastUsed } from "../../src/auth/key-last-used";
import { createKeyVerifier } from "../../src/auth/key-verifier";
import { sha256Hex } from "../../src/auth/tokens";

async function setup() {
  const opened = openDatabase(":memory:");
  const user = await createUser(opened.db, { email: "k@example.com" });
  if ("error" in user) throw new Error(user.error);
  return { ...opened, user };
}

describe("key format", () => {
  test("sk-mg- + 46 base32 characters, unique, with a valid checksum", () => {
    const keys = new Set(Array.from({ length: 1000 }, generateApiKey));
    expect(keys.size).toBe(1000);
    for (const key of keys) {
      expect(key).toMatch(/^sk-mg-[a-z2-7]{46}$/);
      expect(parseApiKey(key).ok).toBe(true);
    }
  });

  test("the checksum is the body's CRC-32 in base32, as keys already issued carry it", () => {
    // Written out the long way (35-bit number, BigInt), independent of the implementation.
    const body = "abcdefghijklmnopqrstuvwxyz234567abcdefg";
    const crc = BigInt(Bun.hash.crc32(body)) << 3n;
    let check = "";
    for (let i = 6n; i >= 0n; i--) check += "abcdefghijklmnopqrstuvwxyz234567"[Number((crc >> (5n * i)) & 31n)];
    expect(parseApiKey(`sk-mg-${body}${check}`)).toMatchObject({ ok: true });
    expect(parseApiKey(`sk-mg-${body}${check === "aaaaaaa" ? "baaaaaa" : "aaaaaaa"}`)).toMatchObject({ ok: false });
  });

  test("every single-character change is caught by the checksum", () => {
    const key = generateApiKey();
    let caught = 0;
    for (let i = "sk-mg-".length; i < key.length; i++) {
      const swapped = key.slice(0, i) + (key[i] === "a" ? "b" : "a") + key.slice(i + 1);
      const parsed = parseApiKey(swapped);
      if (!parsed.ok && parsed.message.includes("checksum")) caught++;
    }
    expect(caught).toBe(key.length - "sk-mg-".length);
  });

  test("malformed and bad-checksum keys are refused without touching the database", async () => {
    const { db, close, user } = await setup();
    const { key } = await createApiKey(db, { userId: user.id, name: "n" });
    const verify = createKeyVerifier(db, Date.now).verify;
    close(); // any database read from here on would throw
    const bad = key.slice(0, -1) + (key.endsWith("a") ? "b" : "a");
    for (const presented of ["", "sk-mg-", "sk-mg-abc", key.toUpperCase(), `${key}a`, key.replace("sk-mg-", "sk-xx-"), bad]) {
      const result = await verify(presented);
      expect(result.ok).toBe(false);
    }
    expect(() => verify(key)).toThrow(); // a well-formed key does read (and the database is closed)
  });
});

describe("storage", () => {
  test("only the SHA-256 is stored; the key is returned once", async () => {
    const { db, sqlite, user } = await setup();
    const created = await createApiKey(db, { userId: user.id, name: "laptop" });
    const row = sqlite.query<Record<string, unknown>, []>("SELECT * FROM api_keys").get()!;
    expect(row.key_hash).toBe(sha256Hex(created.key));
    expect(JSON.stringify(row)).not.toContain(created.key.slice("sk-mg-".length));
    expect(created.displayPrefix).toBe(created.key.slice(0, 12));
    const listed = await listApiKeys(db, { userId: user.id });
    expect(listed).toHaveLength(1);
    expect(JSON.stringify(listed)).not.toContain(created.key);
    expect(listed[0]).toMatchObject({ id: created.id, name: "laptop", email: "k@example.com", revokedAt: null });
  });

  test("an API key pasted into a key's name is stored as its display prefix (regression: stored and listed whole)", async () => {
    const { db, user } = await setup();
    const secret = generateApiKey();
    const created = await createApiKey(db, { userId: user.id, name: `ci ${secret}` });
    expect(created.name).toBe(`ci ${secret.slice(0, 12)}…`);
    expect(JSON.stringify(await listApiKeys(db, { userId: user.id }))).not.toContain(secret.slice(12));
    // Most of one, or one in capitals, is cut too; a name that only starts like a key is kept (regression: `sk-mg-staging-box` became `sk-mg-stagin…`).
    expect((await createApiKey(db, { userId: user.id, name: secret.slice(0, 32) })).name).toBe(`${secret.slice(0, 12)}…`);
    expect((await createApiKey(db, { userId: user.id, name: secret.toUpperCase() })).name).toBe(`${secret.slice(0, 12).toUpperCase()}…`);
    const mistyped = `${secret.slice(0, 20)}0${secret.slice(21)}`; // 0 is no key character
    expect((await createApiKey(db, { userId: user.id, name: mistyped })).name).toBe(`${secret.slice(0, 12)}…`);
    expect((await createApiKey(db, { userId: user.id, name: "sk-mg-staging-box" })).name).toBe("sk-mg-staging-box");
  });

  test("revocation is soft, owner-checked with userId, and idempotent", async () => {
    const { db, user } = await setup();
    const other = await createUser(db, { email: "other@example.com" });
    if ("error" in other) throw new Error(other.error);
    const { id, key } = await createApiKey(db, { userId: user.id, name: "n" });
    const verify = createKeyVerifier(db, Date.now).verify;
    expect((await verify(key)).ok).toBe(true);
    expect(await revokeApiKey(db, id, { userId: other.id })).toBe("not_found");
    expect((await verify(key)).ok).toBe(true);
    expect(await revokeApiKey(db, id, { userId: user.id, now: 123 })).toBe("revoked");
    expect(await revokeApiKey(db, id)).toBe("already_revoked");
    expect(await revokeApiKey(db, "key_nope")).toBe("not_found");
    const result = await verify(key);
    expect(result.ok).toBe(false);
    expect((await listApiKeys(db))[0].revokedAt).toBe(123);
  });

  /** A server's database file with two keys, and a way to revoke one from another connection, as the CLI does. */
  async function fileWithKeys() {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-keys-"));
    const server = openDatabase(dir);
    const user = await createUser(server.db, { email: "cli@example.com" });
    if ("error" in user) throw new Error(user.error);
    const keys = [await createApiKey(server.db, { userId: user.id, name: "a" }), await createApiKey(server.db, { userId: user.id, name: "b" })];
    const revokeElsewhere = async (id: string): Promise<void> => {
      const cli = openDatabase(dir);
      expect(await revokeApiKey(cli.db, id)).toBe("revoked");
      cli.close();
    };
    return { server, keys, revokeElsewhere };
  }

  /** Whether `verify` refuses `key` within a second. */
  async function refusedSoon(verify: (key: string) => { ok: boolean } | Promise<{ ok: boolean }>, key: string): Promise<boolean> {
    for (let i = 0; i < 100; i++) {
      if (!(await verify(key)).ok) return true;
      await Bun.sleep(10);
    }
    return false;
  }

  test("a revocation committed by another connection (the CLI) is noticed within a moment", async () => {
    const {
      server,
      keys: [{ id, key }],
      revokeElsewhere,
    } = await fileWithKeys();
    const verify = createKeyVerifier(server.db, Date.now).verify;
    expect((await verify(key)).ok).toBe(true); // now kept in memory
    await revokeElsewhere(id);
    expect(await refusedSoon(verify, key)).toBe(true);
    server.close();
  });

  test("a poll the database refuses empties the cache, and polling goes on (regression: one refused poll stopped it, and the CLI's revocations were never noticed)", async () => {
    const {
      server,
      keys: [first, second],
      revokeElsewhere,
    } = await fileWithKeys();
    // The verifier's data_version poll, made to fail for a while as a locked or failing database would.
    let refusing = false;
    const query = server.sqlite.query.bind(server.sqlite);
    server.sqlite.query = ((sql: string) => {
      const statement = query(sql);
      if (sql !== "PRAGMA data_version") return statement;
      return {
        get: () => {
          if (refusing) throw new Error("database is locked");
          return statement.get();
        },
      };
    }) as typeof server.sqlite.query;
    const verify = createKeyVerifier(server.db, Date.now).verify;
    expect((await verify(first.key)).ok && (await verify(second.key)).ok).toBe(true); // both kept in memory
    refusing = true;
    await revokeElsewhere(first.id);
    // While the polls fail: nothing kept is trusted, so the key is read again, revoked.
    expect(await refusedSoon(verify, first.key)).toBe(true);
    refusing = false;
    expect((await verify(second.key)).ok).toBe(true); // kept again
    await revokeElsewhere(second.id);
    expect(await refusedSoon(verify, second.key)).toBe(true); // the poll went on
    server.close();
  });

  test("expiry is checked against the injected clock", async () => {
    const { db, user } = await setup();
    let now = 1_000_000;
    const { key } = await createApiKey(db, { userId: user.id, name: "n", expiresAt: 2_000_000 });
    const verify = createKeyVerifier(db, () => now).verify;
    expect((await verify(key)).ok).toBe(true);
    now = 2_000_000;
    const expired = await verify(key);
    expect(expired.ok).toBe(false);
    if (!expired.ok) expect(expired.message).toContain("expired");
  });

  test("last_used_at is written behind, at most once a minute per key", async () => {
    const { db, sqlite, user } = await setup();
    const { id } = await createApiKey(db, { userId: user.id, name: "n" });
    let now = 10_000_000;
    const lastUsed = createLastUsed(db, () => now);
    const read = () => sqlite.query<{ last_used_at: number | null }, [string]>("SELECT last_used_at FROM api_keys WHERE id = ?").get(id)!.last_used_at;
    lastUsed.touch(id);
    expect(read()).toBeNull(); // nothing written on the request path
    lastUsed.flush();
    expect(read()).toBe(10_000_000);
    now += 59_999;
    for (let i = 0; i < 100; i++) lastUsed.touch(id);
    lastUsed.flush();
    expect(read()).toBe(10_000_000);
    now += 1;
    lastUsed.touch(id);
    lastUsed.close();
    expect(read()).toBe(10_060_000);
  });
});
