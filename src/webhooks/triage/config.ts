/**
 * The checks of a `[[jobs]]` table's `triage` and `notify` with messages naming the key path:
 * `notify` goes with `triage` and names at least one target; each kind has the keys it needs
 * (matrix: homeserver, room and token; gotify: url and token; the others: url). A `file:` prompt
 * is read here, relative to the config file, and put in the config in its place; a prompt naming
 * an unknown variable stops start-up, naming it. Runs on the config the schema passed (kinds known).
 */
import { isAbsolute, resolve } from "node:path";
import { ConfigError } from "../../config/errors";
import { readConfigText } from "../../config/text-file";
import type { JobHandlerConfig, NotifierKind } from "../../config/webhooks-schema";
import { PROMPT_VARIABLES, unknownVariables } from "./prompt";

const NEEDS: Record<NotifierKind, ReadonlyArray<"url" | "token" | "homeserver" | "room">> = {
  slack: ["url"],
  discord: ["url"],
  ntfy: ["url"],
  gotify: ["url", "token"],
  matrix: ["homeserver", "room", "token"],
  webhook: ["url"],
};

export function checkTriage(job: JobHandlerConfig, at: string, baseDir: string): void {
  if (job.triage === undefined) {
    if (job.notify !== undefined) throw new ConfigError(`${at}.notify: only a "triage" job notifies; add triage = { model = "…" }`);
    return;
  }
  if (job.notify === undefined || job.notify.length === 0)
    throw new ConfigError(`${at}.notify: a triage job needs at least one target, e.g. notify = [{ kind = "slack", url = "env:SLACK_WEBHOOK_URL" }]`);
  job.notify.forEach((target, i) => {
    const kind = target.kind;
    for (const key of NEEDS[kind]) {
      if (target[key] === undefined || target[key] === "") throw new ConfigError(`${at}.notify[${i}].${key}: required for kind "${kind}"`);
    }
  });
  const triage = job.triage;
  if (triage.prompt === undefined) return;
  let template = triage.prompt;
  let where = `${at}.triage.prompt`;
  if (template.startsWith("file:")) {
    const written = template.slice("file:".length);
    const file = isAbsolute(written) ? written : resolve(baseDir, written);
    template = readConfigText(file, `${where}: ${file}`);
    where = `${where} (${file})`;
    triage.prompt = template;
  }
  const unknown = unknownVariables(template);
  if (unknown.length > 0) {
    throw new ConfigError(
      `${where}: unknown variable${unknown.length > 1 ? "s" : ""} ${unknown.map((v) => `{{${v}}}`).join(", ")} (known: ${Object.keys(PROMPT_VARIABLES).join(", ")})`,
    );
  }
}
