/**
 * `modelgate migrate [--from-sqlite FILE]`: applies the embedded migrations to the configured
 * database (SQLite in server.data_dir, or Postgres with `[database] url`); with --from-sqlite,
 * then copies FILE (a single box's modelgate.db) into that Postgres database
 * (../db/copy-to-postgres.ts), which must be empty, and prints each table's row count. The
 * Postgres modules (Drizzle's pg-core, both schemas) load only then: every command starts with
 * this table, serve among them.
 */
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import type { PgDb } from "../db/postgres";
import { stringFlag, UsageError } from "./args";
import { command, type CliContext } from "./registry";

export const migrateCommand = command(
  async (ctx) => {
    const from = stringFlag(ctx.args, "from-sqlite");
    const url = ctx.databaseUrl();
    if (url === undefined) {
      if (from !== undefined) throw new UsageError("--from-sqlite copies into Postgres: set [database] url in the config first (docs/scaling.md)");
      const db = await ctx.openDb({ create: true }); // opening applies the embedded migrations
      const applied = db.applied;
      await db.close();
      ctx.print(`database is up to date (${ctx.dataDir()}/modelgate.db)${appliedText(applied)}`);
      return 0;
    }
    const source = from === undefined ? null : openSource(from);
    try {
      const { openPostgres } = await import("../db/postgres");
      const pg = await openPostgres(url, { max: 1 });
      try {
        ctx.print(`Postgres database ${ctx.databaseFile()} is up to date${appliedText(pg.applied)}`);
        if (source) return await copy(ctx, { source, pg: pg.db });
        return 0;
      } finally {
        await pg.close();
      }
    } finally {
      source?.close();
    }
  },
  { "": { flags: ["from-sqlite"], words: 1 } },
);

function appliedText(applied: string[]): string {
  return applied.length > 0 ? `, applied ${applied.join(", ")}` : "";
}

/** Opened read-only: the copy never changes the box it comes from. */
function openSource(file: string): Database {
  if (!existsSync(file)) throw new UsageError(`--from-sqlite: no file at ${file}`);
  try {
    return new Database(file, { readonly: true });
  } catch (err) {
    throw new UsageError(`--from-sqlite: cannot open ${file} (${(err as Error)?.message ?? err})`);
  }
}

async function copy(ctx: CliContext, options: { source: Database; pg: PgDb }): Promise<number> {
  const { copyToPostgres, CopyRefused } = await import("../db/copy-to-postgres");
  try {
    const copied = await copyToPostgres(options.source, options.pg);
    for (const { table, rows } of copied) ctx.print(`${table}: ${rows} row(s)`);
    ctx.print(`copied ${copied.reduce((n, t) => n + t.rows, 0)} row(s) from ${options.source.filename}; counts checked`);
    return 0;
  } catch (err) {
    if (err instanceof CopyRefused) throw new UsageError(err.message);
    throw err;
  }
}
