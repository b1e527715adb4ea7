// Users, sessions, the setup link and OAuth links over the engine handle, each run on SQLite and on
// a real PostgreSQL 15 (one cluster for the file, a fresh database per test): the same answers on
// both, the unique email refused by either, a setup link redeemed twice at once acting once, and a
// session found, slid, ended and pruned on both.
import { describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { createPasswordSession, createSession, createSessionValidator, deleteSession, deleteUserSessions, pruneEndedSessions } from "../../src/auth/session";
import { completeSetup, issueSetupLink } from "../../src/auth/setup";
import { createUser, disableUser, enableUser, findUserByEmail, hasAdmin, proveEmail, type User } from "../../src/auth/users";
import { normalizeStoredEmails } from "../../src/auth/stored-emails";
import { stampLegacyLinks, userForProfile } from "../../src/auth/oauth";
import { buildConfig } from "../../src/config/load";
import type { Db } from "../../src/db/client";
import { isUniqueViolation, tablesOf } from "../../src/db/engine";
import { bothEngines } from "../support/engines";

const NOW = Date.UTC(2026, 10, 28, 9);
const DAY = 86_400_000;
const HOUR = 3_600_000;

const engines = bothEngines({ poolSize: 4 });

async function user(db: Db, email: string, options: { password?: string; isAdmin?: boolean } = {}): Promise<User> {
  const created = await createUser(db, { email, ...options });
  if ("error" in created) throw new Error(created.error);
  return created;
}

function tokenOf(link: string): string {
  return new URL(link).searchParams.get("token")!;
}

describe.each(engines)("on %s", (_engine, open) => {
  test("a user is created once: a second account with the address is refused, also when both are made at once", async () => {
    const db = await open();
    const ann = await user(db, " Ann@Example.com ");
    expect(ann).toMatchObject({ email: "ann@example.com", isAdmin: false, emailUnverified: false, disabledAt: null });
    expect(await createUser(db, { email: "ann@example.com" })).toEqual({ error: "a user with the email ann@example.com already exists", param: "email" });
    const both = await Promise.all([createUser(db, { email: "bob@example.com" }), createUser(db, { email: "bob@example.com" })]);
    expect(both.filter((made) => "error" in made)).toHaveLength(1);
    expect((await findUserByEmail(db, "BOB@example.com"))?.email).toBe("bob@example.com");
    expect(await findUserByEmail(db, "nobody@example.com")).toBeNull();
  });

  test("the unique email's refusal of a raw insert is a unique violation to isUniqueViolation, other errors are not", async () => {
    const db = await open();
    const { users } = tablesOf(db);
    await db.insert(users).values({ email: "dup@example.com" });
    const refused = await db
      .insert(users)
      .values({ email: "dup@example.com" })
      .then(
        () => null,
        (err: unknown) => err,
      );
    expect(isUniqueViolation(refused)).toBe(true);
    const other = await db
      .insert(users)
      .values({ id: 1, email: null as unknown as string })
      .then(
        () => null,
        (err: unknown) => err,
      );
    expect(other).not.toBeNull();
    expect(isUniqueViolation(other)).toBe(false);
  });

  test("a session is found, slid at most once an hour, ended by sign-out, and pruned once it can no longer sign in", async () => {
    const db = await open();
    const ann = await user(db, "ann@example.com");
    await db.insert(tablesOf(db).balances).values({ userId: ann.id, micro: 1_250_000 });
    const session = await createSession(db, { userId: ann.id, now: NOW, durationMs: DAY });
    let now = NOW + 30 * 60_000;
    const validate = createSessionValidator(db, { now: () => now, durationMs: DAY });
    expect(await validate(session.token)).toEqual({
      ok: true,
      session: { userId: ann.id, email: "ann@example.com", isAdmin: false, balance: 1_250_000, expiresAt: NOW + DAY, token: session.token },
    });
    expect(await validate("a".repeat(32))).toEqual({ ok: false, message: "The session cookie is not valid; sign in again" });
    now = NOW + 2 * HOUR;
    expect(await validate(session.token)).toMatchObject({ ok: true, session: { expiresAt: now + DAY } });
    const { sessions } = tablesOf(db);
    const [row] = await db.select({ expiresAt: sessions.expiresAt }).from(sessions);
    expect(row.expiresAt).toBe(now + DAY);
    await deleteSession(db, session.token);
    expect(await validate(session.token)).toMatchObject({ ok: false });

    const stale = await createSession(db, { userId: ann.id, now: NOW, durationMs: DAY });
    const live = await createSession(db, { userId: ann.id, now: NOW + 2 * DAY, durationMs: DAY });
    const tooLong = await createSession(db, { userId: ann.id, now: NOW + 2 * DAY, durationMs: 30 * DAY });
    expect(await pruneEndedSessions(db, { now: NOW + 2 * DAY, durationMs: DAY })).toBe(2);
    expect((await db.select({ expiresAt: sessions.expiresAt }).from(sessions)).map((r) => r.expiresAt)).toEqual([NOW + 3 * DAY]);
    now = NOW + 2 * DAY;
    expect(await validate(stale.token)).toMatchObject({ ok: false });
    expect(await validate(tooLong.token)).toMatchObject({ ok: false });
    expect(await validate(live.token)).toMatchObject({ ok: true });
    // An expired row the prune has not reached yet is deleted by the lookup that finds it.
    const expired = await createSession(db, { userId: ann.id, now: NOW, durationMs: DAY });
    expect(await validate(expired.token)).toEqual({ ok: false, message: "The session has expired; sign in again" });
    expect(
      await db
        .select()
        .from(sessions)
        .where(eq(sessions.expiresAt, NOW + DAY)),
    ).toEqual([]);
    await deleteUserSessions(db, ann.id);
    expect(await validate(live.token)).toMatchObject({ ok: false });
  });

  test("a password session is made only while the checked hash is still the account's and it is enabled", async () => {
    const db = await open();
    const ann = await user(db, "ann@example.com", { password: "correct horse" });
    const passwordHash = ann.passwordHash!;
    const made = await createPasswordSession(db, { userId: ann.id, passwordHash, now: NOW, durationMs: DAY });
    expect(made).not.toBeNull();
    expect(await createPasswordSession(db, { userId: ann.id, passwordHash: "another hash", now: NOW, durationMs: DAY })).toBeNull();
    expect(await disableUser(db, ann.id, { now: NOW })).toBe("disabled");
    expect(await createPasswordSession(db, { userId: ann.id, passwordHash, now: NOW, durationMs: DAY })).toBeNull();
    // Disabling ended the session made before it.
    expect(await createSessionValidator(db, { now: () => NOW, durationMs: DAY })(made!.token)).toMatchObject({ ok: false });
    expect(await disableUser(db, ann.id)).toBe("already_disabled");
    expect(await enableUser(db, ann.id)).toBe("enabled");
    expect(await enableUser(db, ann.id)).toBe("already_enabled");
    expect(await disableUser(db, 9_999)).toBe("not_found");
  });

  test("a setup link redeemed twice at once makes one administrator; the other post is refused and changes nothing", async () => {
    const db = await open();
    const token = tokenOf((await issueSetupLink(db, { now: NOW, publicUrl: "http://localhost:8080/" }))!);
    const results = await Promise.all([
      completeSetup(db, { token, email: "first@example.com", password: "first admin pw", now: NOW }),
      completeSetup(db, { token, email: "second@example.com", password: "second admin pw", now: NOW }),
    ]);
    const admins = results.filter((r) => !("error" in r));
    expect(admins).toHaveLength(1);
    expect(results.filter((r) => "error" in r)).toEqual([{ error: "This setup link is invalid, expired or already used" }]);
    const { users } = tablesOf(db);
    expect((await db.select({ email: users.email }).from(users)).map((u) => u.email)).toEqual([(admins[0] as User).email]);
    expect(await hasAdmin(db)).toBe(true);
    expect(await issueSetupLink(db, { now: NOW, publicUrl: "http://localhost:8080" })).toBeNull();
  });

  test("a setup link is refused for an address a sign-up holds, and stays usable", async () => {
    const db = await open();
    await createUser(db, { email: "ops@example.com", password: "signed up pw", emailUnverified: true });
    const token = tokenOf((await issueSetupLink(db, { now: NOW, publicUrl: "http://localhost:8080" }))!);
    expect(await completeSetup(db, { token, email: "ops@example.com", password: "real admin pw", now: NOW })).toMatchObject({ reason: "setup_email_taken" });
    expect(await completeSetup(db, { token, email: "admin@example.com", password: "real admin pw", now: NOW })).toMatchObject({ isAdmin: true });
  });

  test("an OAuth profile links to a proven account once, signs in through the link after, and legacy links are stamped", async () => {
    const db = await open();
    const config = buildConfig({ auth: { signup: "open", github: { client_id: "id", client_secret: "secret" } } }).config;
    const ann = await user(db, "ann@example.com", { password: "correct horse" });
    const profile = { provider: "github", server: "https://api.github.com", providerUserId: "42", email: "ann@example.com", emailVerified: true } as const;
    expect(await userForProfile(db, config, profile)).toMatchObject({ id: ann.id });
    expect(await userForProfile(db, config, profile)).toMatchObject({ id: ann.id });
    // Through the link: the provider's address has changed since, and is no longer verified.
    expect(await userForProfile(db, config, { ...profile, email: "ann@elsewhere.org", emailVerified: false })).toMatchObject({ id: ann.id });
    const { oauthAccounts } = tablesOf(db);
    expect(await db.select({ provider: oauthAccounts.provider, userId: oauthAccounts.userId }).from(oauthAccounts)).toEqual([
      { provider: "github https://api.github.com", userId: ann.id },
    ]);
    const made = await userForProfile(db, config, { ...profile, providerUserId: "43", email: "new@example.com" });
    expect(made).toMatchObject({ email: "new@example.com", emailUnverified: false });
    const unproven = await user(db, "late@example.com");
    await db
      .update(tablesOf(db).users)
      .set({ emailUnverified: true })
      .where(eq(tablesOf(db).users.id, unproven.id));
    expect(await userForProfile(db, config, { ...profile, providerUserId: "44", email: "late@example.com" })).toMatchObject({
      reason: "oauth_unproven_account",
    });
    expect(await proveEmail(db, unproven.id)).toBe("proven");
    expect(await proveEmail(db, unproven.id)).toBe("already_proven");

    // A legacy link (the provider alone); one whose stamped form exists already is left as it is.
    await db.insert(oauthAccounts).values([
      { provider: "github", providerUserId: "7", userId: ann.id },
      { provider: "github", providerUserId: "42", userId: ann.id },
    ]);
    expect(await stampLegacyLinks(db, config)).toBe(1);
    expect(await stampLegacyLinks(db, config)).toBe(0);
    const providers = await db.select({ provider: oauthAccounts.provider, id: oauthAccounts.providerUserId }).from(oauthAccounts);
    expect(providers.map((p) => `${p.provider}/${p.id}`).sort()).toEqual([
      "github https://api.github.com/42",
      "github https://api.github.com/43",
      "github https://api.github.com/7",
      "github/42",
    ]);
  });

  test("stored emails are put in their lookup form; a form another account holds is reported", async () => {
    const db = await open();
    const { users } = tablesOf(db);
    await db.insert(users).values([{ email: "\uff46\uff55\uff4c\uff4c@example.com" }, { email: "taken@example.com" }, { email: "\uff54aken@example.com" }]);
    expect(await normalizeStoredEmails(db)).toEqual([{ id: 3, email: "\uff54aken@example.com" }]);
    expect((await findUserByEmail(db, "full@example.com"))?.id).toBe(1);
    expect(await normalizeStoredEmails(db)).toHaveLength(1);
  });
});
