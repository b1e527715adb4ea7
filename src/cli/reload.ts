/**
 * `modelgate reload [--config FILE]`: checks the config file as `serve` would, asks the server
 * running over its data_dir (found through data_dir/modelgate.pid) to read its own config file
 * again (SIGHUP), and prints what the server answered (data_dir/modelgate.reload): exit 0 when it
 * serves the new config, 1 when it refused it. A file that fails the check here is printed as at
 * start and nothing is sent. The server checks the file again, with its own environment: when
 * this shell lacks a variable the file reads through `env:` (secrets often are the service's
 * alone), the check is left to the server. Give the file the server started with: it reads its own.
 */
import { UnsetVariableError } from "../config/errors";
import { readReloadOutcome, runningServer } from "../pid-file";
import { command } from "./registry";

/** How long the server has to answer; a reload takes milliseconds, a loaded machine longer. */
const ANSWER_WITHIN_MS = 10_000;

export const reloadCommand = command(
  async (ctx) => {
    let checked = true;
    try {
      ctx.config();
    } catch (error) {
      if (!(error instanceof UnsetVariableError)) throw error;
      checked = false;
      console.error(`modelgate: not checked here, the server will: ${error.message}`);
    }
    const dataDir = ctx.dataDir();
    const server = runningServer(dataDir);
    if ("none" in server) {
      console.error(`modelgate: ${server.none}`);
      return 1;
    }
    const before = readReloadOutcome(dataDir, server.pid)?.attempt ?? 0;
    try {
      process.kill(server.pid, "SIGHUP");
    } catch (error) {
      const code = (error as { code?: string }).code;
      console.error(
        `modelgate: cannot signal the server (pid ${server.pid}): ${code === "EPERM" ? "it runs as another user; run this as that user" : String((error as Error)?.message ?? error)}`,
      );
      return 1;
    }
    const deadline = Date.now() + ANSWER_WITHIN_MS;
    for (;;) {
      const outcome = readReloadOutcome(dataDir, server.pid);
      if (outcome !== null && outcome.attempt > before) {
        if (!outcome.ok) {
          console.error(`modelgate: ${outcome.message}`);
          return 1;
        }
        ctx.print(`${checked ? "" : "(checked by the server) "}${outcome.message}`);
        return 0;
      }
      if (Date.now() > deadline) {
        console.error(
          `modelgate: sent SIGHUP to the server (pid ${server.pid}), which did not say within ${ANSWER_WITHIN_MS / 1000} s how the reload went: see its log`,
        );
        return 1;
      }
      await Bun.sleep(20);
    }
  },
  { "": { flags: [], words: 1 } },
);
