/**
 * Opens the SQLite database (WAL, busy timeout, foreign keys) and wraps it in Drizzle. The CLI and
 * the server open the same file; WAL plus the busy timeout make that safe while the server runs.
 * The server's background batch writes wait far less for a lock (brieflyLocked): they are tried
 * again later, and a wait would hold every request.
 */
import { Database } from "bun:sqlite";
import { closeSync, mkdirSync, openSync } from "node:fs";
import { join } from "node:path";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import * as schema from "./schema";
import { applyMigrations } from "./migrate";

export type Db = BunSQLiteDatabase<typeof schema> & { $client: Database };

export interface OpenedDb {
  db: Db;
  sqlite: Database;
  /** The tags of the embedded migrations this open applied, oldest first. */
  applied: string[];
  close(): void;
}

/** How long any statement waits for a write lock another connection holds. */
const BUSY_TIMEOUT_MS = 5_000;
/** How long a background batch write (brieflyLocked) waits for one. */
const BATCH_BUSY_TIMEOUT_MS = 20;

/**
 * `write`, run with a busy timeout of BATCH_BUSY_TIMEOUT_MS: for the server's writes that can be
 * tried again later (write-behind batches, the request-log prune, a session's sliding expiry), so
 * a lock held elsewhere (another process's long transaction) stalls the event loop 20 ms per
 * attempt instead of 5 s. It throws as `write` does; the caller keeps what it could not write.
 */
export function brieflyLocked<A extends unknown[], R>(sqlite: Database, write: (...args: A) => R): (...args: A) => R {
  return (...args) => {
    sqlite.run(`PRAGMA busy_timeout = ${BATCH_BUSY_TIMEOUT_MS}`);
    try {
      return write(...args);
    } finally {
      sqlite.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  };
}

/**
 * `PRAGMA journal_mode = WAL`, tried again for up to the busy timeout: while another process
 * starting at the same moment holds the new file's lock, SQLite answers SQLITE_BUSY at once here,
 * without its busy handler.
 */
function switchToWal(sqlite: Database): void {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  for (;;) {
    try {
      sqlite.run("PRAGMA journal_mode = WAL");
      return;
    } catch (err) {
      const busy = String((err as { code?: unknown }).code ?? "").startsWith("SQLITE_BUSY");
      if (!busy || Date.now() > deadline) throw err;
      Bun.sleepSync(5);
    }
  }
}

/** Creates `file` empty with mode 0600 unless it exists (then untouched: it may be readable only). */
function createPrivately(file: string): void {
  try {
    closeSync(openSync(file, "wx", 0o600));
  } catch (err) {
    if ((err as { code?: unknown }).code !== "EEXIST") throw err;
  }
}

/** `dataDir` of ":memory:" gives a private in-memory database (tests). */
export function openDatabase(dataDir: string): OpenedDb {
  let sqlite: Database;
  if (dataDir === ":memory:") {
    sqlite = new Database(":memory:");
  } else {
    const file = join(dataDir, "modelgate.db");
    try {
      // Created private: the database holds password hashes, emails and the ledger. The file is
      // made 0600 first, as the directory may exist already (a systemd StateDirectory, a volume);
      // SQLite gives the -wal and -shm files the database file's mode. An existing file is left as is.
      mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      createPrivately(file);
      sqlite = new Database(file, { create: true });
      sqlite.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
      switchToWal(sqlite);
    } catch (err) {
      throw new Error(`server.data_dir: cannot open ${file} (${(err as Error)?.message ?? err})`);
    }
  }
  // In WAL mode a commit at NORMAL is in the WAL file once it returns, so it survives a crash of the
  // process (what the credit meter's group commit relies on); only a power loss or an OS crash can
  // take the commits since the last checkpoint, which FULL would save at an fsync per commit.
  sqlite.run("PRAGMA synchronous = NORMAL");
  sqlite.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  sqlite.run("PRAGMA foreign_keys = ON");
  let applied: string[];
  try {
    applied = applyMigrations(sqlite);
  } catch (err) {
    sqlite.close();
    // Another process held the write lock past the busy timeout: say which file, and why it waits.
    if (!String((err as { code?: unknown }).code ?? "").startsWith("SQLITE_BUSY")) throw err;
    throw new Error(
      `${join(dataDir, "modelgate.db")}: locked by another process for over ${BUSY_TIMEOUT_MS / 1000} s (a long transaction or a backup holding it?); try again once it ends`,
    );
  }
  const db = drizzle(sqlite, { schema }) as Db;
  return { db, sqlite, applied, close: () => sqlite.close() };
}

/**
 * A Map kept for each open database, created on first use: the request path's caches of rows
 * (verified keys, balances), so that tests with several in-memory databases never share one.
 */
export function mapPerDatabase<K, V>(): (db: Db) => Map<K, V> {
  const maps = new WeakMap<Database, Map<K, V>>();
  return (db) => {
    let map = maps.get(db.$client);
    if (!map) maps.set(db.$client, (map = new Map()));
    return map;
  };
}
