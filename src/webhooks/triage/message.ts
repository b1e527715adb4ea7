/**
 * The message a triaged alert becomes, the same for every notifier before each formats it
 * (./notify.ts): a title with the status, the summary (or why there is none, with the alert's own
 * lines), a resolved group's reference back to its firing one, and a digest's count and titles.
 * Made from the stored rows when a delivery is attempted, so a retry sends what the first try did.
 */
import type { Db } from "../../db/client";
import { alertById, digestMembers, type AlertRow } from "./store";
import type { Severity } from "./alert";

export interface Message {
  title: string;
  text: string;
  status: string;
  severity: Severity | null;
  kind: string;
  summary: string | null;
  /** The alert this one follows up (a resolved group's firing row), for services that can reply to it. */
  refersTo: number | null;
}

function minutes(ms: number): string {
  const min = Math.max(0, Math.round(ms / 60_000));
  return min < 60 ? `${min} min` : `${Math.floor(min / 60)} h ${min % 60} min`;
}

export async function messageOf(db: Db, alert: AlertRow): Promise<Message> {
  const severity = (alert.severity as Severity | null) ?? null;
  if (alert.state === "digest") {
    const { count, titles } = await digestMembers(db, alert.id);
    const lines = titles.map((t) => `${t.n > 1 ? `${t.n} × ` : ""}${t.title}`);
    const listed = titles.reduce((sum, t) => sum + t.n, 0);
    if (count > listed) lines.push(`and ${count - listed} more`);
    return {
      title: `[STORM] ${count} alerts on ${alert.path}`,
      text: lines.join("\n"),
      status: "firing",
      severity: "critical",
      kind: "digest",
      summary: null,
      refersTo: null,
    };
  }
  const parts: string[] = [];
  const firing = alert.refers_to === null ? null : await alertById(db, alert.refers_to);
  if (firing)
    parts.push(
      `Resolved after ${minutes(alert.created_at - firing.created_at)} (firing since ${new Date(firing.created_at).toISOString().slice(0, 16).replace("T", " ")} UTC: ${firing.title})`,
    );
  if (alert.summary !== null) parts.push(alert.summary);
  else if (alert.summary_error !== null) parts.push(`(no summary: ${alert.summary_error})`);
  if (alert.summary === null && alert.details !== "") parts.push(alert.details);
  const label = alert.status === "info" ? "" : `[${alert.status.toUpperCase()}${severity && alert.status === "firing" ? ` ${severity}` : ""}] `;
  return {
    title: `${label}${alert.title}`,
    text: parts.join("\n\n"),
    status: alert.status,
    severity,
    kind: alert.kind,
    summary: alert.summary,
    refersTo: firing?.id ?? null,
  };
}
