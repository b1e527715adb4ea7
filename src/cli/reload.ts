/**
 * `modelgate reload [--config FILE]`: checks the config file as `serve` would, then asks the
 * server running over its data_dir (found through data_dir/modelgate.pid) to read its own config
 * file again, by SIGHUP. A config that fails its checks is printed as at start and nothing is
 * sent; the server checks the file again when it reads it, and keeps its running config if that
 * fails. Give the same file the server started with: it reads its own.
 */
import { runningServer } from "../pid-file";
import { registerCommand } from "./registry";

registerCommand(
  "reload",
  (ctx) => {
    const loaded = ctx.config();
    const server = runningServer(loaded.config.server.data_dir);
    if ("none" in server) {
      console.error(`modelgate: ${server.none}`);
      return 1;
    }
    try {
      process.kill(server.pid, "SIGHUP");
    } catch (error) {
      const code = (error as { code?: string }).code;
      console.error(`modelgate: cannot signal the server (pid ${server.pid}): ${code === "EPERM" ? "it runs as another user; run this as that user" : String((error as Error)?.message ?? error)}`);
      return 1;
    }
    ctx.print(`${loaded.source ?? "embedded defaults"}: ok; asked the server (pid ${server.pid}) to read its config again: its log says what changed, and /api/status its config_loaded_at`);
    return 0;
  },
  { "": { flags: [], words: 1 } },
);
