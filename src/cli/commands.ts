/**
 * The command table: every command by name, as `modelgate NAME` runs it. The built-in ones (serve,
 * migrate, config, version, help) are ./builtin.ts's; each feature module exports its own rows.
 */
import { settlementsCommand } from "../spendauth/cli";
import { backupCommand, restoreCommand } from "./backup";
import { BUILT_IN } from "./builtin";
import { jobsCommand } from "./jobs";
import { keyCommand } from "./keys";
import { reloadCommand } from "./reload";
import type { CommandEntry } from "./registry";
import { usageCommand } from "./usage";
import { creditsCommand, userCommand } from "./users";

export const COMMANDS: Readonly<Record<string, CommandEntry>> = {
  ...BUILT_IN,
  reload: reloadCommand,
  backup: backupCommand,
  restore: restoreCommand,
  user: userCommand,
  key: keyCommand,
  usage: usageCommand,
  credits: creditsCommand,
  jobs: jobsCommand,
  settlements: settlementsCommand,
};
