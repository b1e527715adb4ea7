/**
 * The command line (DESIGN.md): one table from command name to handler. Each handler gets the
 * parsed args and lazy access to the config and database, and returns an exit code, or null to
 * keep the process running (serve). Only `config()` resolves the `env:` secrets, so a command
 * that works on the database alone runs in a shell without the server's environment.
 */
import { ConfigError, findConfigFile, loadConfig, loadDataDir, readConfigFile, type LoadedConfig } from "../config/load";
import { redactedConfig } from "../config/redact";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { openDatabase } from "../db/client";
import { normalizeStoredEmails } from "../auth/users";
import { serve } from "../serve";
import { COMMIT, VERSION, INTERFACE_VERSION } from "../version";
import { parseArgs, stringFlag, UsageError, type Args } from "./args";
import { maskApiKeys } from "../auth/apikey";
import { printable } from "./table";
import { commands, OTHER_DATA_DIR, shapes, type CliContext, type Command } from "./registry";

const GLOBAL_FLAGS = new Set(["config", "help"]);

const BOOLEAN_FLAGS = new Set(["admin", "force", "password-stdin", "help", "json", "version"]);

Object.assign(shapes, {
  serve: { "": { flags: ["service-id"], words: 1 } },
  migrate: { "": { flags: [], words: 1 } },
  config: { check: { flags: [], words: 2 } },
  version: { "": { flags: ["version"], words: 1 } },
  help: { "": { flags: [], words: 1 } },
});

Object.assign(commands, {
  serve: async (ctx) => {
    const serviceId = parseServiceId(ctx.args);
    const loaded = ctx.config();
    await serve({ loaded, serviceId });
    return null;
  },
  migrate: (ctx) => {
    const db = ctx.openDb({ create: true }); // opening applies the embedded migrations
    const applied = db.applied;
    db.close();
    ctx.print(`database is up to date (${ctx.dataDir()}/modelgate.db)${applied.length > 0 ? `, applied ${applied.join(", ")}` : ""}`);
    return 0;
  },
  config: async (ctx) => {
    if (ctx.args.positionals[1] !== "check") throw new UsageError("usage: modelgate config check [--config FILE]");
    const loaded = ctx.config();
    // What serve checks with viem, loaded only when there is an operator key to check.
    if (loaded.config.spend_auth.operator_key) (await import("../spendauth/setup")).checkOperatorKey(loaded.config.spend_auth);
    ctx.print(`# ${loaded.source ?? "embedded defaults"}: ok`);
    const shown = redactedConfig(loaded) as { server: { public_url: string | null } };
    if (shown.server.public_url === null) ctx.print("# server.public_url: null, as it follows server.listen, whose port the system picks at start");
    ctx.print(JSON.stringify(shown, null, 2));
    return 0;
  },
  version: (ctx) => {
    ctx.print(`modelgate ${VERSION} (commit ${COMMIT}, interface ${INTERFACE_VERSION}, bun ${Bun.version})`);
    return 0;
  },
  help: (ctx) => {
    ctx.print(USAGE);
    return 0;
  },
} satisfies Record<string, Command>);

/**
 * `--service-id`, else $MODELGATE_SERVICE_ID, else 0: decimal digits only (Number() would take
 * `0x10`, `1e3` and an empty string), below 2^53; an error names where the bad value came from.
 */
function parseServiceId(args: Args): number {
  const flag = stringFlag(args, "service-id");
  // An empty variable is unset (`MODELGATE_SERVICE_ID=${ID}` with ID unset), as for MODELGATE_CONFIG.
  const [text, source] = flag !== undefined ? [flag, "--service-id"] : [process.env.MODELGATE_SERVICE_ID || undefined, "MODELGATE_SERVICE_ID"];
  if (text === undefined) return 0;
  const id = /^\d{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(id)) throw new UsageError(`${source} must be a whole number from 0 to 2^53 - 1, in decimal digits`);
  return id;
}

/** Every flag some command takes (`serve --bogus` is an unknown flag, not a flag without a value). */
function knownFlags(): Set<string> {
  const known = new Set(GLOBAL_FLAGS);
  for (const own of Object.values(shapes)) for (const shape of Object.values(own)) for (const flag of shape.flags) known.add(flag);
  return known;
}

function checkShape(args: Args, name: string): void {
  const sub = args.positionals[1];
  const own = shapes[name];
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

const USAGE = `usage: modelgate <command> [--config FILE]   (modelgate help, or --help: this text; --version: version)
  serve [--service-id N]                       run the gateway (default command)
  reload                                       check the config, then have the running server read it again
  migrate                                      apply embedded database migrations
  backup FILE [--force]                        copy the database to FILE while the server runs
  restore FILE                                 put a backup in place of the database (server stopped)
  config check                                 validate and print the resolved config (secrets redacted)
  user add EMAIL [--admin] [--password-stdin]  create a user
  user password EMAIL                          set a new password, read from stdin; their sessions end
  user disable EMAIL | user enable EMAIL       end a user's sessions and stop their keys; undo that
  user verify EMAIL                            vouch for an address a password sign-up never proved
  key create --user EMAIL [--name N] [--expires 30d] [KEY POLICY FLAGS]   create an API key (printed once)
  key update KEY_ID|KEY [KEY POLICY FLAGS]      --models "llama*,qwen3:*" --budget 5/day --per-minute N
                                               --tokens-per-minute N --allow-ip 10.0.0.0/8 (empty clears)
  key list [--user EMAIL] [--json] | key revoke KEY_ID|KEY
  usage export [--user EMAIL] [--key KEY_ID|KEY] [--from DATE] [--to DATE] [--format csv|json]
  credits grant --user EMAIL --amount 12.50 [--note TEXT] | credits balance --user EMAIL
  jobs list [--state pending|leased|done|dead] [--limit N] [--json] | jobs retry CALL_ID
  settlements list [--state pending|authorized|done|dead] [--json] | settlements retry ID
  version`;

export async function runCli(argv: string[]): Promise<number | null> {
  await import("./commands");
  try {
    const args = parseArgs(argv, BOOLEAN_FLAGS, knownFlags());
    // `modelgate --version`, as most tools take it, is `modelgate version` (never a start of serve).
    const name = args.positionals[0] ?? (args.flags.has("version") ? "version" : "serve");
    const command = commands[name];
    const known = Object.hasOwn(commands, name);
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
    const file = (): string | null => findConfigFile(stringFlag(args, "config"));
    const context: CliContext = {
      args,
      config: () => (loaded ??= loadConfig(file())),
      dataDir: () => (dataDir ??= loadDataDir(file())),
      rawConfig: () => readConfigFile(file()),
      databaseFile: () => join(resolve(context.dataDir()), "modelgate.db"),
      openDb: (options = {}) => {
        const database = context.databaseFile();
        if (!options.create && !existsSync(database)) {
          throw new UsageError(`no database at ${database}: nothing is stored under this data_dir yet (${OTHER_DATA_DIR}; serve, migrate and user add create it)`);
        }
        const opened = openDatabase(context.dataDir());
        normalizeStoredEmails(opened.db);
        return opened;
      },
      print: (line) => console.log(line),
    };
    return await command(context);
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
