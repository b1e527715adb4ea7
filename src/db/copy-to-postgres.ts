/**
 * `modelgate migrate --from-sqlite FILE`: every row of a single box's SQLite database copied into
 * an empty Postgres database, in one Postgres transaction read from one SQLite snapshot (a server
 * may still be writing the file). The target must be empty: copying over rows already there would
 * mix two gateways' users and ledgers. Rows keep their ids; each identity sequence then starts
 * past the highest id SQLite ever gave (its AUTOINCREMENT counter), so a webhook call_id is never
 * handed out twice. Each table's count is compared before the commit; any difference undoes all.
 */
import type { Database } from "bun:sqlite";
import { getTableConfig as pgTableConfig, PgTable } from "drizzle-orm/pg-core";
import { getTableConfig as sqliteTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import { drizzle } from "drizzle-orm/bun-sqlite";
import { sql as raw } from "drizzle-orm";
import type { PgDb } from "./postgres";
import { migrations } from "./migrations.gen";
import * as sqliteSchema from "./schema";
import { postgresDedupeKey } from "./dedupe-key";
import * as pgSchema from "./schema-pg";

export interface CopiedTable {
  table: string;
  rows: number;
}

/** Rows per INSERT: 16 columns at most, far below Postgres's 65,535 parameters a statement. */
const CHUNK = 500;

export class CopyRefused extends Error {
  override name = "CopyRefused";
}

/**
 * Every table paired with its Postgres twin, each after the tables its foreign keys point at (a
 * module's exports come in name order, which would put api_keys before users).
 */
function tablePairs(): { name: string; from: SQLiteTable; to: PgTable }[] {
  const targets = new Map<string, PgTable>();
  for (const value of Object.values(pgSchema)) if (value instanceof PgTable) targets.set(pgTableConfig(value).name, value);
  const waiting = new Map<string, { from: SQLiteTable; refers: string[] }>();
  for (const value of Object.values(sqliteSchema)) {
    if (!(value instanceof SQLiteTable)) continue;
    const config = sqliteTableConfig(value);
    const refers = config.foreignKeys.map((fk) => sqliteTableConfig(fk.reference().foreignTable).name).filter((n) => n !== config.name);
    waiting.set(config.name, { from: value, refers });
  }
  const pairs: { name: string; from: SQLiteTable; to: PgTable }[] = [];
  while (waiting.size > 0) {
    const ready = [...waiting].filter(([, t]) => t.refers.every((n) => !waiting.has(n)));
    if (ready.length === 0) throw new Error(`foreign keys form a cycle among ${[...waiting.keys()].join(", ")}`);
    for (const [name, { from }] of ready) {
      const to = targets.get(name);
      if (!to) throw new Error(`${name}: no Postgres table of that name (src/db/schema-pg/)`);
      pairs.push({ name, from, to });
      waiting.delete(name);
    }
  }
  return pairs;
}

/** A row as Postgres holds it: a webhook call's dedupe key has a space where SQLite's has NUL. */
function asPostgresHolds(table: string, row: Record<string, unknown>): Record<string, unknown> {
  if (table !== "webhook_jobs" || typeof row.dedupeKey !== "string") return row;
  return { ...row, dedupeKey: postgresDedupeKey(row.dedupeKey) };
}

/** Refuses a file whose schema is not this release's: its columns would not be the ones copied. */
function checkSchema(sqlite: Database): void {
  const row = sqlite.query<{ created_at: number }, []>("SELECT max(created_at) AS created_at FROM __drizzle_migrations").get();
  const newest = migrations[migrations.length - 1];
  if (Number(row?.created_at) !== newest.when) {
    throw new CopyRefused(
      `${sqlite.filename}: its schema is not this release's (${newest.tag}); run \`modelgate migrate\` with a config whose server.data_dir holds it (no [database] url), then copy again`,
    );
  }
}

export async function copyToPostgres(sqlite: Database, pg: PgDb): Promise<CopiedTable[]> {
  const hasMigrations = sqlite.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'").get();
  if (!hasMigrations) throw new CopyRefused(`${sqlite.filename}: not a modelgate database (it has no migrations table)`);
  checkSchema(sqlite);
  const source = drizzle(sqlite);
  const pairs = tablePairs();
  sqlite.run("BEGIN");
  try {
    const counters = new Map(
      sqlite
        .query<{ name: string; seq: number }, []>("SELECT name, seq FROM sqlite_sequence")
        .all()
        .map((r) => [r.name, Number(r.seq)]),
    );
    return await pg.transaction(async (tx) => {
      for (const { name } of pairs) {
        const [found] = (await tx.execute(raw.raw(`SELECT count(*)::int AS n FROM "${name}"`))) as unknown as { n: number }[];
        if (found.n > 0) throw new CopyRefused(`the Postgres database is not empty (${name} has ${found.n} row(s)); copy into an empty database`);
      }
      const copied: CopiedTable[] = [];
      for (const { name, from, to } of pairs) {
        let rows = 0;
        // Paged by rowid, not OFFSET: a request log of millions of rows is read once, not over and over.
        for (let after = Number.MIN_SAFE_INTEGER; ; ) {
          const chunk = source.select({ rowid: raw<number>`rowid`, row: from }).from(from).where(raw`rowid > ${after}`).orderBy(raw`rowid`).limit(CHUNK).all();
          if (chunk.length === 0) break;
          await tx
            .insert(to)
            .values(chunk.map((c) => asPostgresHolds(name, c.row)) as never[])
            .catch((err: unknown) => {
              throw new Error(`${name}: Postgres refused rows ${rows + 1} to ${rows + chunk.length} (${causeOf(err)}); nothing was copied`);
            });
          rows += chunk.length;
          after = chunk[chunk.length - 1].rowid;
        }
        const [inSource] = sqlite.query<{ n: number }, []>(`SELECT count(*) AS n FROM "${name}"`).all();
        const [inTarget] = (await tx.execute(raw.raw(`SELECT count(*)::int AS n FROM "${name}"`))) as unknown as { n: number }[];
        if (inSource.n !== rows || inTarget.n !== rows) {
          throw new Error(`${name}: ${inSource.n} row(s) in SQLite, ${rows} read, ${inTarget.n} in Postgres; nothing was copied`);
        }
        await advanceSequence(tx, { table: to, counter: counters.get(name) ?? 0 });
        copied.push({ table: name, rows });
      }
      return copied;
    });
  } finally {
    sqlite.run("COMMIT");
  }
}

/** The database's own message: Drizzle's wrapper repeats the statement's parameters (password hashes among them). */
function causeOf(err: unknown): string {
  const cause = (err as { cause?: unknown })?.cause ?? err;
  return String((cause as Error)?.message ?? cause);
}

/** Moves a table's identity sequence past both its highest id and SQLite's AUTOINCREMENT counter. */
async function advanceSequence(tx: Pick<PgDb, "execute">, options: { table: PgTable; counter: number }): Promise<void> {
  const config = pgTableConfig(options.table);
  const identity = config.columns.find((c) => c.primary && (c as { generatedIdentity?: unknown }).generatedIdentity);
  if (!identity) return;
  await tx.execute(
    raw`SELECT setval(pg_get_serial_sequence(${config.name}, ${identity.name}), greatest(${options.counter}::bigint, (SELECT coalesce(max(${raw.identifier(identity.name)}), 0) FROM ${raw.identifier(config.name)}), 1), (SELECT count(*) > 0 FROM ${raw.identifier(config.name)}) OR ${options.counter}::bigint > 0)`,
  );
}
