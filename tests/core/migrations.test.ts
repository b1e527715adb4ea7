/**
 * Embedded migrations on a database that is already in use: one made by a release that had only
 * the first migration gets the later ones at the next start, keeps its rows, and a second start
 * applies nothing.
 */
import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { chmodSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { applyMigrations } from "../../src/db/migrate";
import { migrations } from "../../src/db/migrations.gen";
import { findUserByEmail } from "../../src/auth/users";
import { normalizeStoredEmails } from "../../src/auth/stored-emails";

test("a database at the first migration is brought up to date at open, rows intact; then nothing is pending", () => {
  const dir = mkdtempSync(join(tmpdir(), "mg-migrate-"));
  const old = new Database(join(dir, "modelgate.db"), { create: true });
  old.run("PRAGMA journal_mode = WAL");
  old.run("CREATE TABLE __drizzle_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, hash text NOT NULL, created_at numeric)");
  for (const statement of migrations[0].sql.split("--> statement-breakpoint")) if (statement.trim()) old.run(statement);
  old.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('first', ?)", [migrations[0].when]);
  const insertUser = old.prepare("INSERT INTO users (email, password_hash, is_admin, created_at) VALUES (?, ?, ?, 1)");
  insertUser.run("ops@example.com", "hash", 1); // an administrator
  insertUser.run("signed-up@example.com", "hash", 0); // a password account: perhaps an open sign-up
  insertUser.run("cli@example.com", null, 0); // no password: the CLI or OAuth made it
  insertUser.run("linked@example.com", "hash", 0);
  old.run("INSERT INTO oauth_accounts (provider, provider_user_id, user_id, created_at) VALUES ('github', '1', 4, 1)");
  old.close();

  expect(migrations.length).toBeGreaterThan(1);
  const opened = openDatabase(dir);
  const applied = opened.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM __drizzle_migrations").get()!.n;
  expect(applied).toBe(migrations.length);
  // Accounts from before: proven only when an administrator, a provider or the lack of a password vouches for them.
  expect(opened.sqlite.query("SELECT email, email_unverified FROM users ORDER BY id").all()).toEqual([
    { email: "ops@example.com", email_unverified: 0 },
    { email: "signed-up@example.com", email_unverified: 1 },
    { email: "cli@example.com", email_unverified: 0 },
    { email: "linked@example.com", email_unverified: 0 },
  ]);
  // A row written without the column (an older release run on this database) is unproven.
  opened.sqlite.run("INSERT INTO users (email, password_hash, created_at) VALUES ('rollback@example.com', 'hash', 1)");
  expect(opened.sqlite.query("SELECT email_unverified FROM users WHERE email = 'rollback@example.com'").get()).toEqual({ email_unverified: 1 });
  expect(applyMigrations(opened.sqlite)).toEqual([]);
  opened.close();
});

test("emails stored before NFKC are put in their lookup form; one whose form is taken is reported and left alone", async () => {
  const { db, sqlite, close } = openDatabase(":memory:");
  const insert = sqlite.prepare("INSERT INTO users (email, created_at, email_unverified) VALUES (?, 1, 0)");
  insert.run("\uff46\uff55\uff4c\uff4c@example.com"); // fullwidth, as an older release stored it
  insert.run("\ufb01le@example.com"); // a ligature
  insert.run("taken@example.com");
  insert.run("\uff54aken@example.com"); // its form belongs to the row above
  insert.run("ops\u200b@example.com"); // no longer an address at all
  insert.run("t\u0308om@example.com"); // lower-cased after NFKC only, as an older release stored it
  insert.run("a@xn--bcher-kva.de");
  expect(await normalizeStoredEmails(db)).toEqual([
    { id: 4, email: "\uff54aken@example.com" },
    { id: 5, email: "ops\u200b@example.com" },
  ]);
  expect((await findUserByEmail(db, "\u1e97om@example.com"))?.id).toBe(6);
  expect((await findUserByEmail(db, "a@b\u00fccher.de"))?.id).toBe(7);
  expect((await findUserByEmail(db, "\uff46\uff55\uff4c\uff4c@example.com"))?.id).toBe(1);
  expect((await findUserByEmail(db, "full@example.com"))?.id).toBe(1);
  expect((await findUserByEmail(db, "file@example.com"))?.id).toBe(2);
  expect((await findUserByEmail(db, "taken@example.com"))?.id).toBe(3);
  expect(await normalizeStoredEmails(db)).toHaveLength(2); // nothing more to do; the same two reported
  close();
});

test('a start while another process holds the write lock past the busy timeout names the file and the cause (regression: a bare "database is locked")', () => {
  const dir = mkdtempSync(join(tmpdir(), "mg-migrate-"));
  openDatabase(dir).close();
  const other = new Database(join(dir, "modelgate.db"));
  other.run("BEGIN IMMEDIATE");
  try {
    expect(() => openDatabase(dir)).toThrow(`${join(dir, "modelgate.db")}: locked by another process for over 5 s`);
  } finally {
    other.run("ROLLBACK");
    other.close();
  }
}, 15_000);

test("a database file made in a directory that already exists is private, and so are its -wal and -shm (regression: 0644 under the usual umask)", () => {
  const dir = mkdtempSync(join(tmpdir(), "mg-migrate-"));
  chmodSync(dir, 0o755);
  const opened = openDatabase(dir);
  opened.sqlite.run("INSERT INTO users (email, created_at) VALUES ('a@example.com', 1)"); // the WAL is written
  for (const name of ["modelgate.db", "modelgate.db-wal", "modelgate.db-shm"])
    expect(`${name} ${(statSync(join(dir, name)).mode & 0o777).toString(8)}`).toBe(`${name} 600`);
  opened.close();
  // A file that exists is left as its owner set it.
  const shared = mkdtempSync(join(tmpdir(), "mg-migrate-"));
  writeFileSync(join(shared, "modelgate.db"), "");
  chmodSync(join(shared, "modelgate.db"), 0o640);
  openDatabase(shared).close();
  expect((statSync(join(shared, "modelgate.db")).mode & 0o777).toString(8)).toBe("640");
});
