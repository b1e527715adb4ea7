/**
 * The checks of a `[[jobs]]` table's `triage` and `notify` with messages naming the key path:
 * `notify` goes with `triage` and names at least one target; each kind has the keys it needs
 * (matrix: homeserver, room and token; gotify: url and token; the others: url). A `file:` prompt
 * is read here, relative to the config file, and put in the document in its place; a prompt naming
 * an unknown variable stops start-up, naming it. Works on the raw document, narrowing each value.
 */
import { isAbsolute, resolve } from "node:path";
import { ConfigError } from "../../config/errors";
import { readConfigText } from "../../config/text-file";
import { NOTIFIER_KINDS } from "../../config/webhooks-schema";
import { PROMPT_VARIABLES, unknownVariables } from "./prompt";
import { isObject, type Raw } from "./narrow";

const NEEDS: Record<(typeof NOTIFIER_KINDS)[number], readonly string[]> = {
  slack: ["url"],
  discord: ["url"],
  ntfy: ["url"],
  gotify: ["url", "token"],
  matrix: ["homeserver", "room", "token"],
  webhook: ["url"],
};

export function checkTriage(job: Raw, at: string, baseDir: string): void {
  if (job.triage === undefined) {
    if (job.notify !== undefined) throw new ConfigError(`${at}.notify: only a "triage" job notifies; add triage = { model = "…" }`);
    return;
  }
  if (!Array.isArray(job.notify) || job.notify.length === 0) throw new ConfigError(`${at}.notify: a triage job needs at least one target, e.g. notify = [{ kind = "slack", url = "env:SLACK_WEBHOOK_URL" }]`);
  job.notify.forEach((target, i) => {
    if (!isObject(target)) return;
    const kind = target.kind;
    if (!(NOTIFIER_KINDS as readonly unknown[]).includes(kind)) throw new ConfigError(`${at}.notify[${i}].kind: expected one of ${NOTIFIER_KINDS.join(", ")} (got ${JSON.stringify(kind)})`);
    for (const key of NEEDS[kind as keyof typeof NEEDS]) {
      if (target[key] === undefined || target[key] === "") throw new ConfigError(`${at}.notify[${i}].${key}: required for kind "${kind}"`);
    }
  });
  const triage = job.triage;
  if (!isObject(triage) || typeof triage.prompt !== "string") return;
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
    throw new ConfigError(`${where}: unknown variable${unknown.length > 1 ? "s" : ""} ${unknown.map((v) => `{{${v}}}`).join(", ")} (known: ${Object.keys(PROMPT_VARIABLES).join(", ")})`);
  }
}
