/**
 * The command line (DESIGN.md): runs the row of the command table (./commands.ts) that a name
 * picks. Each command gets the parsed args and lazy access to the config and database, and returns
 * an exit code, or null to keep the process running (serve). Only `config()` resolves the `env:` secrets, so a command
 * that works on the database alone runs in a shell without the server's environment.
 */
import { ConfigError, findConfigFile, loadConfig, loadDataDir, loadDatabaseUrl, readConfigFile, type LoadedConfig } from "../config/load";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { openStorage } from "../db/open";
import { describePostgresUrl } from "../db/where";
import { normalizeStoredEmails } from "../auth/stored-emails";
import { parseArgs, stringFlag, UsageError, type Args } from "./args";
import { maskApiKeys } from "../auth/apikey";
import { printable } from "./table";
import { OTHER_DATA_DIR, type CliContext } from "./registry";
import { COMMANDS } from "./commands";
import { USAGE } from "./builtin";

const GLOBAL_FLAGS = new Set(["config", "help"]);

const BOOLEAN_FLAGS = new Set(["admin", "force", "password-stdin", "help", "json", "version"]);

/** Every flag some command takes (`serve --bogus` is an unknown flag, not a flag without a value). */
function knownFlags(): Set<string> {
  const known = new Set(GLOBAL_FLAGS);
  for (const { shapes: own } of Object.values(COMMANDS)) for (const shape of Object.values(own)) for (const flag of shape.flags) known.add(flag);
  return known;
}

function checkShape(args: Args, name: string): void {
  const sub = args.positionals[1];
  const own = COMMANDS[name]?.shapes;
  // Own keys only: a subcommand named like an Object member ("constructor") is simply unknown.
  const shape = own && (Object.hasOwn(own, "") ? own[""] : sub !== undefined && Object.hasOwn(own, sub) ? own[sub] : undefined);
  if (!shape) return;
  const label = Object.hasOwn(own, "") ? name : `${name} ${sub}`;
  for (const flag of args.flags.keys()) {
    if (!GLOBAL_FLAGS.has(flag) && !shape.flags.includes(flag)) throw new UsageError(`modelgate ${label} has no flag --${flag}`);
  }
  const extra = args.positionals[Math.max(shape.words, 1)];
  if (extra !== undefined) throw new UsageError(`modelgate ${label}: unexpected argument ${JSON.stringify(extra)}`);
}

export async function runCli(argv: string[]): Promise<number | null> {
  try {
    const args = parseArgs(argv, BOOLEAN_FLAGS, knownFlags());
    // `modelgate --version`, as most tools take it, is `modelgate version` (never a start of serve).
    const name = args.positionals[0] ?? (args.flags.has("version") ? "version" : "serve");
    const known = Object.hasOwn(COMMANDS, name);
    if (!known || args.flags.has("help")) {
      if (known) {
        console.log(USAGE);
        return 0;
      }
      // On stderr, with the error: `KEY=$(modelgate kye create …)` must not take the usage for a key.
      console.error(shownError(`modelgate: unknown command ${JSON.stringify(name)}`));
      console.error(USAGE);
      return 2;
    }
    checkShape(args, name);
    let loaded: LoadedConfig | undefined;
    let dataDir: string | undefined;
    let databaseUrl: { url: string | undefined } | undefined;
    const file = (): string | null => findConfigFile(stringFlag(args, "config"));
    const context: CliContext = {
      args,
      config: () => (loaded ??= loadConfig(file())),
      dataDir: () => (dataDir ??= loadDataDir(file())),
      rawConfig: () => readConfigFile(file()),
      databaseUrl: () => (databaseUrl ??= { url: loadDatabaseUrl(file()) }).url,
      databaseFile: () => {
        const url = context.databaseUrl();
        return url === undefined ? join(resolve(context.dataDir()), "modelgate.db") : describePostgresUrl(url);
      },
      openDb: async (options = {}) => {
        // Every command on the database comes through here, on either engine.
        const url = context.databaseUrl();
        const database = context.databaseFile();
        if (url === undefined && !options.create && !existsSync(database)) {
          throw new UsageError(
            `no database at ${database}: nothing is stored under this data_dir yet (${OTHER_DATA_DIR}; serve, migrate and user add create it)`,
          );
        }
        // A command makes one query at a time: two connections, whatever the server's pool_size.
        const opened = await openStorage({ dataDir: context.dataDir(), url, poolSize: 2 });
        await normalizeStoredEmails(opened.db);
        return opened;
      },
      print: (line) => console.log(line),
    };
    return await COMMANDS[name].run(context);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`modelgate: config error: ${shownError(err.message)}`);
      return 1;
    }
    if (err instanceof UsageError) {
      console.error(`modelgate: ${shownError(err.message)}`);
      return 2;
    }
    console.error(`modelgate: ${shownError(String((err as Error)?.message ?? err))}`);
    return 1;
  }
}

/**
 * An error as the terminal shows it: a key typed where something else belongs (`key revoke
 * sk-mg-…`) not printed back whole, and what the user typed (an email with an escape sequence)
 * unable to retitle or recolour the terminal: control characters escaped, line by line.
 */
function shownError(message: string): string {
  return maskApiKeys(message).split("\n").map(printable).join("\n");
}
