/**
 * The store behind /v1/responses' `store`, on SQLite and on a real Postgres: rows found only by
 * their owner, the size bound, a taken id keeping its first owner, and the prune by age.
 */
import { describe, expect, test } from "bun:test";
import { createResponseStore, pruneStoredResponses, responseOwner } from "../../src/router/response-store";
import { bothEngines } from "../support/engines";

const DAY = 86_400_000;

/** A fresh database of the engine for each test. */
const engines = bothEngines();

describe.each(engines)("stored responses on %s", (_engine, open) => {
  async function store(maxBytes = 10_000, now = () => 1_000 * DAY) {
    const db = await open();
    return { db, store: createResponseStore(db, { maxBytes, now }) };
  }

  test("a response is found by its owner only", async () => {
    const { store: s } = await store();
    expect(await s.put({ id: "resp_1", owner: "user:1", items: [{ type: "message", role: "user", content: "hi" }], response: { id: "resp_1" } })).toBe(true);
    expect(await s.get("resp_1", "user:1")).toEqual({ items: [{ type: "message", role: "user", content: "hi" }], response: { id: "resp_1" } });
    expect(await s.get("resp_1", "user:2")).toBeNull();
    expect(await s.get("resp_1", "spend:0xabc")).toBeNull();
    expect(await s.bytes("resp_1")).toBeGreaterThan(0);
  });

  test("an id already taken keeps its first owner's row", async () => {
    const { store: s } = await store();
    await s.put({ id: "resp_same", owner: "user:1", items: [], response: { id: "resp_same", mine: 1 } });
    expect(await s.put({ id: "resp_same", owner: "user:2", items: [], response: { id: "resp_same", mine: 2 } })).toBe(false);
    expect((await s.get("resp_same", "user:1"))!.response).toEqual({ id: "resp_same", mine: 1 });
    expect(await s.get("resp_same", "user:2")).toBeNull();
  });

  test("a response over the size bound is not kept", async () => {
    const { store: s } = await store(2_000);
    expect(
      await s.put({ id: "resp_big", owner: "user:1", items: [{ type: "message", role: "user", content: "x".repeat(3_000) }], response: { id: "resp_big" } }),
    ).toBe(false);
    expect(await s.get("resp_big", "user:1")).toBeNull();
  });

  test("rows older than the retention are pruned, newer ones kept", async () => {
    let now = 10 * DAY;
    const { db, store: s } = await store(10_000, () => now);
    await s.put({ id: "resp_old", owner: "user:1", items: [], response: { id: "resp_old" } });
    now = 50 * DAY;
    await s.put({ id: "resp_new", owner: "user:1", items: [], response: { id: "resp_new" } });
    expect(await pruneStoredResponses(db, now - 30 * DAY)).toBe(1);
    expect(await s.get("resp_old", "user:1")).toBeNull();
    expect(await s.get("resp_new", "user:1")).not.toBeNull();
  });
});

describe("stored responses", () => {
  test("owners: a key's and a session's user alike, a SpendAuth commitment, none for anonymous", () => {
    expect(responseOwner({ kind: "api_key", userId: 7, keyId: "key_a", subject: "key_a" })).toBe("user:7");
    expect(responseOwner({ kind: "session", userId: 7, keyId: null, subject: "user:7" })).toBe("user:7");
    expect(responseOwner({ kind: "spend_auth", userId: null, keyId: null, subject: "0xabc" })).toBe("spend:0xabc");
    expect(responseOwner({ kind: "anonymous", userId: null, keyId: null, subject: "ip:127.0.0.1" })).toBeNull();
  });
});
