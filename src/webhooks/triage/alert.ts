/**
 * The one shape every webhook body is read into (./parse.ts, ./github.ts) and triage works from:
 * an AlertGroup, its alerts, their status and severity.
 */
export type AlertKind = "alertmanager" | "grafana" | "uptime-kuma" | "github" | "json" | "text" | "digest";
export type AlertStatus = "firing" | "resolved" | "info";
export type Severity = "critical" | "warning" | "info";

export interface AlertLine {
  status: string;
  name: string;
  severity: Severity | null;
  summary: string | null;
  /** The labels other than alertname and severity, `k=v, …`. */
  labels: string | null;
  fingerprint: string | null;
}

export interface AlertGroup {
  kind: AlertKind;
  /** GitHub's event name (push, pull_request, …): its X-GitHub-Event header, else guessed from the body. */
  event?: string;
  status: AlertStatus;
  groupKey: string | null;
  dedupeKey: string | null;
  title: string;
  severity: Severity | null;
  alerts: AlertLine[];
}
