/**
 * `modelgate backup FILE` and `modelgate restore FILE`.
 *
 * backup: SQLite's `VACUUM INTO` copies the database inside one read transaction, so the copy is
 * consistent while a server keeps writing (WAL lets it write meanwhile). The copy is written beside
 * FILE under another name and renamed into place once checked: FILE is either the old file or a
 * whole backup, never half of one. It is private (0600): it holds password hashes and the ledger.
 *
 * restore: refuses while any process has the database open. The test is SQLite's own lock: every
 * connection to a WAL database holds a shared lock on the file for as long as it is open, so an
 * exclusive lock is refused while a server (or another command) runs, and is granted once it has
 * exited, however it exited (the kernel drops a dead process's locks; a pid file can go stale).
 * The backup is copied into the data directory as a new file, the current database is kept
 * beside it (modelgate.db.before-restore-TIME) and the copy renamed over it. Closing the lock's
 * connection, the last one, has folded the WAL into the old file and removed it; a -shm left by
 * a process that died is removed too, so nothing of the old database meets the restored one.
 *
 * Both are SQLite's: with `[database] url` they refuse (a usage error, exit 2) before touching
 * anything, naming Postgres' own tools.
 */
import { Database } from "bun:sqlite";
import { chmodSync, chownSync, closeSync, existsSync, linkSync, mkdirSync, openSync, renameSync, statSync, unlinkSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { OTHER_DATA_DIR, command, type CliContext } from "./registry";
import { UsageError } from "./args";
import { migrations } from "../db/migrations.gen";

const BACKUP_USAGE = "usage: modelgate backup FILE [--force]";
const RESTORE_USAGE = "usage: modelgate restore FILE";

/** Creates `file` empty and private, failing if it exists: VACUUM INTO then fills it. */
function createEmpty(file: string): void {
  closeSync(openSync(file, "wx", 0o600));
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {}
}

/** `VACUUM INTO` a new file beside `target`, checked, then renamed to `target`. */
function copyDatabase(source: Database, target: string): void {
  const partial = join(dirname(target), `.${basename(target)}.partial-${process.pid}`);
  try {
    createEmpty(partial);
  } catch (err) {
    throw new Error(`cannot write ${target}: ${(err as Error).message}`);
  }
  try {
    source.run("VACUUM INTO ?", [partial]);
    checkDatabase(partial);
    renameSync(partial, target);
  } catch (err) {
    removeQuietly(partial);
    throw err;
  }
}

/** Throws unless `file` is a sound modelgate database this release can run. */
function checkDatabase(file: string): void {
  let db: Database;
  try {
    db = new Database(file, { readonly: true });
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    const check = db.query<{ quick_check: string }, []>("PRAGMA quick_check").get();
    if (check?.quick_check !== "ok") throw new Error(`${file} is damaged (quick_check: ${check?.quick_check})`);
    const last = db.query<{ at: number | null }, []>("SELECT max(created_at) AS at FROM __drizzle_migrations").get();
    const newest = migrations[migrations.length - 1];
    if (last?.at != null && Number(last.at) > newest.when) {
      throw new Error(
        `${file} was made by a newer modelgate (its schema is newer than this release's ${newest.tag}): restore it with that release or a later one`,
      );
    }
  } catch (err) {
    const message = (err as Error).message;
    if (/no such table|not a database/.test(message)) throw new Error(`${file} is not a modelgate database (${message})`);
    throw err;
  } finally {
    db.close();
  }
}

/** Throws the usage error of a command on the SQLite file when the config names a Postgres database. */
function refuseOnPostgres(ctx: CliContext, instead: string): void {
  if ((ctx.rawConfig().database as { url?: unknown } | undefined)?.url === undefined) return;
  throw new UsageError(`${ctx.args.positionals[0]}: database.url names a Postgres database, which this command cannot copy; ${instead}`);
}

function backup(ctx: CliContext): number {
  refuseOnPostgres(ctx, "back it up with pg_dump (pg_dump --format=custom --file=FILE URL)");
  const operand = ctx.args.positionals[1];
  if (operand === undefined) throw new UsageError(BACKUP_USAGE);
  const target = resolve(operand);
  if (existsSync(target) && !ctx.args.flags.has("force")) throw new UsageError(`${target} exists: give --force to replace it, or name another file`);
  const database = ctx.databaseFile();
  if (!existsSync(database)) throw new UsageError(`no database at ${database}: nothing to back up (${OTHER_DATA_DIR})`);
  const source = new Database(database);
  try {
    source.run("PRAGMA busy_timeout = 5000");
    copyDatabase(source, target);
  } finally {
    source.close();
  }
  ctx.print(`backed up ${database} to ${target} (${statSync(target).size} bytes)`);
  return 0;
}

/**
 * Opens `database` holding SQLite's exclusive lock, or returns null when another connection has
 * it open. The lock is kept until close (locking_mode EXCLUSIVE), so no server starts meanwhile.
 */
function lockAlone(database: string): Database | null {
  const db = new Database(database);
  try {
    db.run("PRAGMA busy_timeout = 0");
    db.run("PRAGMA locking_mode = EXCLUSIVE");
    db.run("BEGIN EXCLUSIVE");
    db.run("COMMIT");
    return db;
  } catch (err) {
    db.close();
    if (String((err as { code?: unknown }).code ?? "").startsWith("SQLITE_BUSY")) return null;
    throw err;
  }
}

function restore(ctx: CliContext): number {
  refuseOnPostgres(ctx, "restore a pg_dump backup with pg_restore (pg_restore --dbname=URL FILE)");
  const operand = ctx.args.positionals[1];
  if (operand === undefined) throw new UsageError(RESTORE_USAGE);
  const source = resolve(operand);
  if (!existsSync(source)) throw new UsageError(`no file at ${source}`);
  checkDatabase(source);
  const dataDir = resolve(ctx.dataDir());
  const database = ctx.databaseFile();
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const exists = existsSync(database);
  const current = exists ? lockAlone(database) : null;
  if (exists && current === null) {
    throw new Error(`${database} is open in another process (a running server, or a command): stop the server first (systemctl stop modelgate), then restore`);
  }
  const incoming = join(dataDir, `.modelgate.db.restoring-${process.pid}`);
  try {
    const backupDb = new Database(source, { readonly: true });
    try {
      copyDatabase(backupDb, incoming);
    } finally {
      backupDb.close();
    }
  } finally {
    current?.close(); // the last connection: the WAL is folded into the file and removed
  }
  if (existsSync(`${database}-wal`)) {
    removeQuietly(incoming);
    throw new Error(`${database} was opened by another process during the restore (its -wal file is back): stop it, then restore again`);
  }
  // Left by a process that died (kill -9, a power cut): the lock's connection used no -shm, and a
  // new database must not meet an old one's.
  removeQuietly(`${database}-shm`);
  let kept: string | null = null;
  if (exists) {
    kept = `${database}.before-restore-${new Date().toISOString().replace(/[:.]/g, "-")}`;
    linkSync(database, kept);
    const { uid, gid, mode } = statSync(database);
    // Run as root for a service user's database: the restored file stays the service's.
    if (process.getuid?.() === 0) chownSync(incoming, uid, gid);
    chmodSync(incoming, mode & 0o777);
  }
  renameSync(incoming, database);
  ctx.print(`restored ${source} into ${database}${kept ? `; the database it replaced is kept as ${kept}` : ""}`);
  return 0;
}

export const backupCommand = command(backup, { "": { flags: ["force"], words: 2 } });
export const restoreCommand = command(restore, { "": { flags: [], words: 2 } });
