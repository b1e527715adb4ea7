/**
 * Embedded migrations on a database that is already in use: one made by a release that had only
 * the first migration gets the later ones at the next start, keeps its rows, and a second start
 * applies nothing.
 */
import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { applyMigrations } from "../../src/db/migrate";
import { migrations } from "../../src/db/migrations.gen";

test("a database at the first migration is brought up to date at open, rows intact; then nothing is pending", () => {
  const dir = mkdtempSync(join(tmpdir(), "mg-migrate-"));
  const old = new Database(join(dir, "modelgate.db"), { create: true });
  old.run("PRAGMA journal_mode = WAL");
  old.run("CREATE TABLE __drizzle_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, hash text NOT NULL, created_at numeric)");
  for (const statement of migrations[0].sql.split("--> statement-breakpoint")) if (statement.trim()) old.run(statement);
  old.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('first', ?)", [migrations[0].when]);
  old.run("INSERT INTO users (email, password_hash, is_admin, created_at) VALUES ('ops@example.com', NULL, 1, 1)");
  old.close();

  expect(migrations.length).toBeGreaterThan(1);
  const opened = openDatabase(dir);
  const applied = opened.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM __drizzle_migrations").get()!.n;
  expect(applied).toBe(migrations.length);
  // An account made before password sign-ups were marked is trusted as before (an administrator's tool made it).
  expect(opened.sqlite.query("SELECT email, is_admin, email_unverified FROM users").all()).toEqual([{ email: "ops@example.com", is_admin: 1, email_unverified: 0 }]);
  expect(applyMigrations(opened.sqlite)).toBe(0);
  opened.close();
});
