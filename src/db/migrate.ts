/**
 * Applies the migrations embedded in the binary (src/db/migrations.gen.ts, generated from
 * drizzle/ by `make migrations`). Bookkeeping uses drizzle-kit's own `__drizzle_migrations` table
 * and hashes, so `drizzle-kit migrate` and the binary agree on what has run.
 * A database a newer release has migrated past this binary's last migration is refused, changed in
 * nothing: this release's code would write rows that schema may not take (a column it added with
 * no default), and losing writes or answering 500 is worse than not starting.
 */
import type { Database } from "bun:sqlite";
import { migrations } from "./migrations.gen";

/** Returns the tags of the migrations this call applied, oldest first. */
export function applyMigrations(sqlite: Database): string[] {
  // What is pending is decided inside the write transaction: two processes starting on a fresh
  // data_dir at once (a server and a CLI command) would otherwise both apply the same migration.
  const apply = sqlite.transaction((): string[] => {
    sqlite.run(`CREATE TABLE IF NOT EXISTS __drizzle_migrations (
      id INTEGER PRIMARY KEY AUTOINCREMENT, hash text NOT NULL, created_at numeric)`);
    const last = sqlite.query<{ created_at: number }, []>("SELECT created_at FROM __drizzle_migrations ORDER BY created_at DESC LIMIT 1").get();
    const newest = migrations[migrations.length - 1];
    if (last && Number(last.created_at) > newest.when) {
      throw new Error(
        `${sqlite.filename}: this database has been migrated by a newer modelgate (its schema is from ${isoDate(Number(last.created_at))}; this release's is from ${isoDate(newest.when)}, ${newest.tag}). Run that release or a later one, or point server.data_dir at another directory`,
      );
    }
    const pending = migrations.filter((m) => !last || Number(last.created_at) < m.when);
    for (const m of pending) {
      for (const statement of m.sql.split("--> statement-breakpoint")) {
        if (statement.trim()) sqlite.run(statement);
      }
      const hash = new Bun.CryptoHasher("sha256").update(m.sql).digest("hex");
      sqlite.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)", [hash, m.when]);
    }
    return pending.map((m) => m.tag);
  });
  return apply.immediate();
}

function isoDate(ms: number): string {
  return Number.isFinite(ms) ? new Date(ms).toISOString().slice(0, 10) : String(ms);
}
