/**
 * What a command of the CLI is: what it is given (CliContext), what it accepts (its shapes), and
 * the row it is in the command table (./commands.ts). Below the commands and the table, so that
 * each command module and the table import it without a cycle.
 */
import type { LoadedConfig } from "../config/load";
import type { OpenedStorage } from "../db/open";
import type { Args } from "./args";

export interface CliContext {
  args: Args;
  /** The whole config, every `env:` secret resolved: fails naming an unset variable. */
  config(): LoadedConfig;
  /** server.data_dir of a config checked as for serve, whose secrets' variables may be unset. */
  dataDir(): string;
  /** The config file's TOML as written, unchecked and unresolved: for what a message names only. */
  rawConfig(): Record<string, unknown>;
  /** `[database] url` with its `env:` variable resolved, or undefined: SQLite in dataDir(). */
  databaseUrl(): string | undefined;
  /** Where the data lives, for messages: the SQLite file's absolute path, or Postgres' host:port/database (never the URL). */
  databaseFile(): string;
  /**
   * The configured database, migrated: Postgres with `[database] url`, else SQLite in dataDir().
   * A SQLite file that does not exist yet is a usage error unless `create` (migrate, user add): a
   * command run from the wrong directory must not start an empty database there and answer from it.
   */
  openDb(options?: { create?: boolean }): Promise<OpenedStorage>;
  print(line: string): void;
}

export type Command = (ctx: CliContext) => Promise<number | null> | number | null;

/**
 * What a command (or one of its subcommands) accepts: its flags besides --config and --help, and
 * how many words it takes, its name included (`key revoke KEY_ID` is 3). Checked before the
 * command runs, so a mistyped flag (`--expire 30d`) or a second operand is an error, not ignored.
 */
interface CommandShape {
  flags: readonly string[];
  words: number;
}
/** Shapes by subcommand; "" for a command without subcommands. A subcommand not listed is the command's own usage error. */
export type CommandShapes = Record<string, CommandShape>;

/** For a message about a database that lacks what was asked for: it may be another directory's. */
export const OTHER_DATA_DIR = "a server's database is under the data_dir of its config: run from its directory, or pass --config";

/** A command and the shapes it accepts: one row of the command table (./commands.ts). */
export interface CommandEntry {
  run: Command;
  shapes: CommandShapes;
}

/** A row of the command table. */
export function command(run: Command, shapes: CommandShapes): CommandEntry {
  return { run, shapes };
}
