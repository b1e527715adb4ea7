/**
 * A GitHub webhook delivery read into an AlertGroup. The event is GitHub's `X-GitHub-Event`
 * header when the ingress stored it (src/webhooks/headers.ts); only without it is the event
 * guessed from which object the body carries. A body sent as `application/x-www-form-urlencoded`
 * (GitHub's other content type) carries the JSON in its `payload` field. A failed workflow or
 * check run is `firing` (warning): someone may need to act; every other event is `info`.
 */
import type { AlertGroup } from "./alert";
import { isObject, str, type Raw } from "./narrow";

/** The objects whose name says the event when no header does, in the order they are looked for. */
const SUBJECTS: ReadonlyArray<[key: string, event: string]> = [
  ["pull_request", "pull_request"],
  ["issue", "issues"],
  ["release", "release"],
  ["workflow_run", "workflow_run"],
  ["check_run", "check_run"],
  ["alert", "alert"],
];

const FAILED = new Set(["failure", "timed_out", "startup_failure", "action_required"]);

/** The JSON of a GitHub delivery, from either content type GitHub sends; null if neither parses. */
export function githubPayload(text: string, contentType: string | null): unknown {
  const form = contentType?.toLowerCase().startsWith("application/x-www-form-urlencoded") === true;
  try {
    return JSON.parse(form ? (new URLSearchParams(text).get("payload") ?? "") : text);
  } catch {
    return null;
  }
}

/** Whether an unlabelled body looks like a GitHub delivery (the fallback without the header). */
export function looksLikeGithub(json: Raw): boolean {
  return isObject(json.sender) && (isObject(json.repository) || isObject(json.organization) || "hook_id" in json);
}

function branchOf(ref: string | null): string | null {
  return ref?.replace(/^refs\/(heads|tags)\//, "") ?? null;
}

/** What the event is about, in a few words: `push of 3 commits to main`, `pull request #4 "Fix"`. */
function subjectOf(event: string, json: Raw): string {
  const item = (key: string): Raw | null => (isObject(json[key]) ? (json[key] as Raw) : null);
  switch (event) {
    case "push": {
      const commits = Array.isArray(json.commits) ? json.commits.length : 0;
      const head = item("head_commit");
      const message = str(head?.message)?.split("\n", 1)[0];
      return `push of ${commits} commit${commits === 1 ? "" : "s"} to ${branchOf(str(json.ref)) ?? "?"}${json.forced === true ? " (forced)" : ""}${message ? ` "${message}"` : ""}`;
    }
    case "pull_request":
    case "pull_request_review":
    case "pull_request_review_comment": {
      const pr = item("pull_request");
      return `${event.replaceAll("_", " ")} #${str(pr?.number) ?? "?"}${pr?.merged === true ? " (merged)" : ""} "${str(pr?.title) ?? ""}"`;
    }
    case "issues":
    case "issue_comment": {
      const issue = item("issue");
      return `${event === "issues" ? "issue" : "issue comment"} #${str(issue?.number) ?? "?"} "${str(issue?.title) ?? ""}"`;
    }
    case "workflow_run":
    case "check_run":
    case "workflow_job": {
      const run = item(event);
      const branch = str(run?.head_branch) ?? (isObject(run?.check_suite) ? str(run.check_suite.head_branch) : null);
      return `${event.replaceAll("_", " ")} "${str(run?.name) ?? ""}"${branch ? ` on ${branch}` : ""}: ${str(run?.conclusion) ?? str(run?.status) ?? "?"}`;
    }
    case "release":
      return `release ${str(item("release")?.tag_name) ?? str(item("release")?.name) ?? ""}`.trim();
    case "ping":
      return "ping (the webhook was set up)";
    default:
      return event.replaceAll("_", " ");
  }
}

/** `event`: the X-GitHub-Event header, or null to guess it from the body. */
export function githubGroup(json: Raw, event: string | null): AlertGroup {
  const guessed = event ?? SUBJECTS.find(([key]) => isObject(json[key]))?.[1] ?? ("hook_id" in json ? "ping" : null);
  const repository = isObject(json.repository) ? str(json.repository.full_name) : isObject(json.organization) ? str(json.organization.login) : null;
  const action = str(json.action);
  const sender = isObject(json.sender) ? str(json.sender.login) : null;
  const run = guessed === "workflow_run" || guessed === "check_run" || guessed === "workflow_job" ? (json[guessed] as Raw | undefined) : undefined;
  const failed = isObject(run) && FAILED.has(str(run.conclusion) ?? "");
  const subject = guessed === null ? null : subjectOf(guessed, json);
  const title = [repository, subject, action, sender ? `by ${sender}` : null].filter(Boolean).join(" ");
  return {
    kind: "github",
    event: guessed ?? undefined,
    status: failed ? "firing" : "info",
    groupKey: null,
    dedupeKey: null,
    title: title || "GitHub event",
    severity: failed ? "warning" : null,
    alerts: [],
  };
}
