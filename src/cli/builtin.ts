/**
 * The commands built into the command line itself: serve (the default), migrate, config check,
 * version and help, with the usage text. serve loads the server (Elysia, the dashboard, the
 * router) only when it runs, so that the other commands start without it.
 */
import { redactedConfig } from "../config/redact";
import { COMMIT, INTERFACE_VERSION, VERSION } from "../version";
import { stringFlag, UsageError, type Args } from "./args";
import { migrateCommand } from "./migrate";
import { command, type CommandEntry } from "./registry";

export const BUILT_IN: Readonly<Record<string, CommandEntry>> = {
  serve: command(
    async (ctx) => {
      const serviceId = parseServiceId(ctx.args);
      const loaded = ctx.config();
      const { serve } = await import("../serve");
      await serve({ loaded, serviceId });
      return null;
    },
    { "": { flags: ["service-id"], words: 1 } },
  ),
  migrate: migrateCommand,
  config: command(
    async (ctx) => {
      if (ctx.args.positionals[1] !== "check") throw new UsageError("usage: modelgate config check [--config FILE]");
      const loaded = ctx.config();
      // What serve checks with viem, loaded only when there is an operator key to check.
      if (loaded.config.spend_auth.operator_key) (await import("../spendauth/setup")).checkOperatorKey(loaded.config.spend_auth);
      // What serve would connect to, reached now: a config whose database or Redis is out of reach is not ok.
      const reached = await (await import("./connections")).checkConnections(loaded.config);
      ctx.print(`# ${loaded.source ?? "embedded defaults"}: ok`);
      for (const line of reached) ctx.print(line);
      const shown = redactedConfig(loaded) as { server: { public_url: string | null } };
      if (shown.server.public_url === null) ctx.print("# server.public_url: null, as it follows server.listen, whose port the system picks at start");
      ctx.print(JSON.stringify(shown, null, 2));
      return 0;
    },
    { check: { flags: [], words: 2 } },
  ),
  version: command(
    (ctx) => {
      ctx.print(`modelgate ${VERSION} (commit ${COMMIT}, interface ${INTERFACE_VERSION}, bun ${Bun.version})`);
      return 0;
    },
    { "": { flags: ["version"], words: 1 } },
  ),
  help: command(
    (ctx) => {
      ctx.print(USAGE);
      return 0;
    },
    { "": { flags: [], words: 1 } },
  ),
};

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

export const USAGE = `usage: modelgate <command> [--config FILE]   (modelgate help, or --help: this text; --version: version)
  serve [--service-id N]                       run the gateway (default command)
  reload                                       check the config, then have the running server read it again
  migrate [--from-sqlite FILE]                 apply embedded database migrations; copy a SQLite database into [database] url
  backup FILE [--force]                        copy the SQLite database to FILE while the server runs
  restore FILE                                 put a backup in place of the database (server stopped)
  config check                                 validate, reach [database] url and [cluster] redis_url if set,
                                               and print the resolved config (secrets redacted)
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
