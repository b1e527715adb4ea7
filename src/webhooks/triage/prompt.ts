/**
 * The prompt a triage job sends its model: a template per kind of alert (built in, or the user's
 * own `prompt`), with `{{variable}}` places filled from the recognised alert (./parse.ts). A
 * template naming a variable that does not exist is refused when the config loads
 * (unknownVariables), so a typo cannot reach the model as literal braces.
 */
import type { AlertGroup, AlertKind } from "./alert";

/** Every variable a template may name, with what it holds (docs/triage.md lists the same). */
export const PROMPT_VARIABLES = {
  kind: "what sent it: alertmanager, grafana, uptime-kuma, github, json or text",
  event: "GitHub's event (push, pull_request, issues, workflow_run, …), or empty",
  status: "firing, resolved or info",
  title: "a one-line title (alert names, monitor name, GitHub event)",
  severity: "critical, warning, info, or empty",
  alert_count: "how many alerts the group holds",
  alerts: "one line per alert: status, name, severity, summary, labels",
  body: "the body as received (at most 8,000 characters)",
  endpoint: "the webhook path it arrived on",
  name: "the endpoint's name, or empty",
} as const;

type PromptVariable = keyof typeof PROMPT_VARIABLES;

const PLACE = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;
/** How much of the body a prompt carries: enough for any alert, bounded for a model's context. */
const BODY_CHARS = 8_000;

const ALERT_GROUP = `You triage monitoring alerts for an on-call engineer. In at most five short lines, say what is wrong, how bad it is, the likely cause, and the first thing to check. Plain text, no preamble.

Source: {{kind}} ({{endpoint}})
Status: {{status}}   Severity: {{severity}}   Alerts: {{alert_count}}
{{title}}

{{alerts}}`;

const BUILT_IN: Record<AlertKind, string> = {
  alertmanager: ALERT_GROUP,
  grafana: ALERT_GROUP,
  "uptime-kuma": `A service monitor changed state. In at most three short lines, say what is down or back, for how long if known, and what to check first. Plain text.

{{title}} ({{status}})

{{alerts}}`,
  github: `Summarise this GitHub event for a team chat in at most three short lines: what happened, where, and whether anyone needs to act. Plain text.

GitHub event: {{event}}
{{title}}

{{body}}`,
  json: `Summarise this notification for an on-call engineer in at most four short lines: what happened and whether anyone needs to act. Plain text.

Received on {{endpoint}}:
{{body}}`,
  text: `Summarise this notification for an on-call engineer in at most four short lines: what happened and whether anyone needs to act. Plain text.

Received on {{endpoint}}:
{{body}}`,
  digest: "",
};

/**
 * What the GitHub template asks about the common events, put after its first line; another event
 * gets the template alone.
 */
const GITHUB_FOCUS: Record<string, string> = {
  push: "Say which branch, how many commits and by whom; call out a force push or a push to the default branch.",
  pull_request: "Say what happened to the pull request (opened, merged, closed), its title and author, and whether a review is wanted.",
  pull_request_review: "Say who reviewed which pull request and the verdict (approved, changes requested).",
  issues: "Say what happened to the issue, its title, and whether it reads like a bug report that needs someone.",
  issue_comment: "Say who commented on which issue or pull request and whether a reply is needed.",
  workflow_run: "Say which workflow on which branch finished and how; a failure needs someone to look at the run.",
  workflow_job: "Say which job of which workflow finished and how; a failure needs someone to look at it.",
  check_run: "Say which check on which branch finished and how; a failure needs someone to look at it.",
  release: "Say which release was published and by whom.",
  ping: "Say that GitHub confirmed the webhook is set up; nobody needs to act.",
};

/** The variables a template names that are not PROMPT_VARIABLES, each once, in order. */
export function unknownVariables(template: string): string[] {
  const unknown = new Set<string>();
  for (const match of template.matchAll(PLACE)) if (!Object.hasOwn(PROMPT_VARIABLES, match[1])) unknown.add(match[1]);
  return [...unknown];
}

export interface PromptInput {
  group: AlertGroup;
  body: string;
  endpoint: string;
  name: string | null;
}

/** The template (the user's, else the kind's own) with its places filled. */
export function renderPrompt(template: string | undefined, input: PromptInput): string {
  const values = promptValues(input);
  return (template ?? builtIn(input.group)).replace(PLACE, (_, name: string) => values[name as PromptVariable] ?? "");
}

function builtIn(group: PromptInput["group"]): string {
  const focus = group.kind === "github" && group.event !== undefined && Object.hasOwn(GITHUB_FOCUS, group.event) ? GITHUB_FOCUS[group.event] : undefined;
  if (focus === undefined) return BUILT_IN[group.kind];
  const [first, ...rest] = BUILT_IN.github.split("\n");
  return [first, focus, ...rest].join("\n");
}

function promptValues({ group, body, endpoint, name }: PromptInput): Record<PromptVariable, string> {
  return {
    kind: group.kind,
    event: group.event ?? "",
    status: group.status,
    title: group.title,
    severity: group.severity ?? "",
    alert_count: String(group.alerts.length),
    alerts: group.alerts
      .map((a) => `- [${a.status}] ${a.name}${a.severity ? ` (${a.severity})` : ""}${a.summary ? `: ${a.summary}` : ""}${a.labels ? ` {${a.labels}}` : ""}`)
      .join("\n"),
    body: body.length > BODY_CHARS ? `${body.slice(0, BODY_CHARS)}\n[… ${body.length - BODY_CHARS} more characters]` : body,
    endpoint,
    name: name ?? "",
  };
}
