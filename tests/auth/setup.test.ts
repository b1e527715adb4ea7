import { describe, expect, test } from "bun:test";
import { openDatabase } from "../../src/db/client";
import { completeSetup, issueSetupLink, setupTokenValid } from "../../src/auth/setup";
import { createUser, disableUser, findUserByEmail, hasAdmin, verifyPassword, type User } from "../../src/auth/users";
import { createApiKey } from "../../src/auth/apikey";
import { createKeyVerifier } from "../../src/auth/key-verifier";
import { createSession, createSessionValidator } from "../../src/auth/session";

const NOW = 1_800_000_000_000;
const DAY = 86_400_000;
const tokenOf = (link: string): string => new URL(link).searchParams.get("token")!;

describe("first-run setup", () => {
  test("one link per start; only its hash is stored; none once an admin exists", async () => {
    const { db, sqlite } = openDatabase(":memory:");
    const first = (await issueSetupLink(db, { now: NOW, publicUrl: "https://gw.example.com/" }))!;
    expect(first).toMatch(/^https:\/\/gw\.example\.com\/setup\?token=[a-z2-7]{32}$/);
    const second = (await issueSetupLink(db, { now: NOW, publicUrl: "https://gw.example.com" }))!;
    expect(await setupTokenValid(db, tokenOf(first), NOW)).toBe(false); // replaced
    expect(await setupTokenValid(db, tokenOf(second), NOW)).toBe(true);
    expect(JSON.stringify(sqlite.query("SELECT * FROM setup_tokens").all())).not.toContain(tokenOf(second));
    await createUser(db, { email: "root@example.com", isAdmin: true });
    expect(await issueSetupLink(db, { now: NOW, publicUrl: "https://gw.example.com" })).toBeNull();
    expect(await setupTokenValid(db, tokenOf(second), NOW)).toBe(false);
  });

  test("two concurrent posts of one link: exactly one creates the administrator", async () => {
    const { db } = openDatabase(":memory:");
    const token = tokenOf((await issueSetupLink(db, { now: NOW, publicUrl: "http://localhost:8080" }))!);
    const results = await Promise.all(
      ["a@example.com", "b@example.com"].map((email) => completeSetup(db, { token, email, password: "long enough pw", now: NOW })),
    );
    expect(results.filter((r) => "error" in r)).toHaveLength(1);
    expect([await findUserByEmail(db, "a@example.com"), await findUserByEmail(db, "b@example.com")].filter((u) => u?.isAdmin)).toHaveLength(1);
  });

  test("a refused post changes nothing; an existing user is promoted; the link expires after 24 h", async () => {
    const { db } = openDatabase(":memory:");
    await createUser(db, { email: "existing@example.com", password: "old password" });
    const token = tokenOf((await issueSetupLink(db, { now: NOW, publicUrl: "http://localhost:8080" }))!);
    expect(await completeSetup(db, { token, email: "existing@example.com", password: "short", now: NOW })).toMatchObject({ param: "password" });
    expect(await completeSetup(db, { token: "a".repeat(32), email: "existing@example.com", password: "new password!", now: NOW })).toHaveProperty("error");
    expect(await verifyPassword(db, "existing@example.com", "old password")).not.toBeNull();
    expect(await completeSetup(db, { token, email: "existing@example.com", password: "new password!", now: NOW + 86_400_000 })).toHaveProperty("error");
    expect(await hasAdmin(db)).toBe(false);
    const later = tokenOf((await issueSetupLink(db, { now: NOW, publicUrl: "http://localhost:8080" }))!);
    const admin = await completeSetup(db, { token: later, email: "Existing@example.com", password: "new password!", now: NOW });
    expect(admin).toMatchObject({ email: "existing@example.com", isAdmin: true });
    expect(await verifyPassword(db, "existing@example.com", "new password!")).not.toBeNull();
  });

  test("an account made by a password sign-up is refused, not adopted (regression: its maker's session became the administrator's)", async () => {
    const { db } = openDatabase(":memory:");
    const squatter = (await createUser(db, { email: "ops@example.com", password: "squatter pw", emailUnverified: true })) as User;
    const session = await createSession(db, { userId: squatter.id, now: NOW, durationMs: DAY });
    const token = tokenOf((await issueSetupLink(db, { now: NOW, publicUrl: "http://localhost:8080" }))!);
    const refused = await completeSetup(db, { token, email: "OPS@example.com", password: "real admin pw", now: NOW });
    expect(refused).toMatchObject({ param: "email", reason: "setup_email_taken" });
    expect(await hasAdmin(db)).toBe(false);
    expect(await verifyPassword(db, "ops@example.com", "squatter pw")).not.toBeNull();
    expect(await createSessionValidator(db, { now: () => NOW, durationMs: DAY })(session.token)).toMatchObject({ ok: true, session: { isAdmin: false } });
    // The link still works for another address.
    expect(await completeSetup(db, { token, email: "admin@example.com", password: "real admin pw", now: NOW })).toMatchObject({ isAdmin: true });
  });

  test("adopting an account the CLI made ends the sessions it had", async () => {
    const { db } = openDatabase(":memory:");
    const made = (await createUser(db, { email: "ops@example.com", password: "first password" })) as User;
    const session = await createSession(db, { userId: made.id, now: NOW, durationMs: DAY });
    const token = tokenOf((await issueSetupLink(db, { now: NOW, publicUrl: "http://localhost:8080" }))!);
    expect(await completeSetup(db, { token, email: "ops@example.com", password: "real admin pw", now: NOW })).toMatchObject({ id: made.id, isAdmin: true });
    expect((await createSessionValidator(db, { now: () => NOW, durationMs: DAY })(session.token)).ok).toBe(false);
  });

  test("adopting a disabled account enables its API keys at once (regression: the server kept them refused as the owner's disabled)", async () => {
    const { db } = openDatabase(":memory:");
    const made = (await createUser(db, { email: "ops@example.com", password: "first password" })) as User;
    const { key } = await createApiKey(db, { userId: made.id, name: "ci" });
    const verifier = createKeyVerifier(db, () => NOW);
    await disableUser(db, made.id);
    expect(verifier.verify(key)).toMatchObject({ ok: false, message: "The account that owns this API key is disabled" });
    const token = tokenOf((await issueSetupLink(db, { now: NOW, publicUrl: "http://localhost:8080" }))!);
    expect(await completeSetup(db, { token, email: "ops@example.com", password: "real admin pw", now: NOW })).toMatchObject({
      isAdmin: true,
      disabledAt: null,
    });
    expect(verifier.verify(key)).toMatchObject({ ok: true });
  });
});
