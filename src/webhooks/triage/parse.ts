/**
 * Recognises what a stored webhook body is and reads it into one shape, an AlertGroup: an
 * Alertmanager v4 or Grafana alert group, an Uptime Kuma notification, a GitHub event (by its
 * `X-GitHub-Event` header; by the body's shape only when the header is absent: ./github.ts), or
 * else any JSON or text. Nothing here throws: a body no reader recognises (or that is not UTF-8 or
 * JSON at all) is triaged as text, never dropped. Every value is narrowed before use (the body is
 * the sender's, unchecked).
 *
 * `groupKey` names what later notifications of the same thing share (Alertmanager's groupKey, a
 * Kuma monitor); `dedupeKey` names this notification's content (status and the alerts'
 * fingerprints): a repeat of the last one for its group is not sent again.
 */
import type { StoredHeader } from "../headers";
import type { AlertGroup, AlertLine, AlertStatus, Severity } from "./alert";
import { githubGroup, githubPayload, looksLikeGithub } from "./github";
import { isObject, str, type Raw } from "./narrow";

/** A sender's severity word as one of three (Alertmanager's `severity` label, Grafana's, a priority). */
function severityOf(value: unknown): Severity | null {
  const word = str(value)?.toLowerCase();
  if (word === undefined || word === null) return null;
  if (/^(critical|crit|page|high|error|emergency|fatal|p1|disaster)$/.test(word)) return "critical";
  if (/^(warning|warn|medium|average|p2|p3)$/.test(word)) return "warning";
  return "info";
}

const RANK: Record<Severity, number> = { info: 0, warning: 1, critical: 2 };

function highest(severities: Array<Severity | null>): Severity | null {
  let top: Severity | null = null;
  for (const s of severities) if (s !== null && (top === null || RANK[s] > RANK[top])) top = s;
  return top;
}

export interface ParseInput {
  body: Uint8Array;
  contentType: string | null;
  /** The allowlisted request headers stored with the call. */
  headers?: Partial<Record<StoredHeader, string>>;
}

export function parseAlert(input: ParseInput): AlertGroup {
  const text = new TextDecoder("utf-8", { fatal: false }).decode(input.body);
  const event = input.headers?.["x-github-event"] ?? null;
  if (event !== null) {
    const payload = githubPayload(text, input.contentType);
    return githubGroup(isObject(payload) ? payload : {}, event);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return textGroup(text);
  }
  if (isObject(json)) {
    if (Array.isArray(json.alerts) && (str(json.groupKey) !== null || "orgId" in json)) return alertGroup(json);
    if ("heartbeat" in json && "monitor" in json) return kumaGroup(json);
    if (looksLikeGithub(json)) return githubGroup(json, null);
  }
  return {
    kind: "json",
    status: "info",
    groupKey: null,
    dedupeKey: null,
    title: jsonTitle(json),
    severity: isObject(json) ? severityOf(json.severity ?? json.priority ?? json.level) : null,
    alerts: [],
  };
}

function textGroup(text: string): AlertGroup {
  const first = text.trim().split("\n", 1)[0] ?? "";
  return { kind: "text", status: "info", groupKey: null, dedupeKey: null, title: first.slice(0, 200) || "(empty body)", severity: null, alerts: [] };
}

function jsonTitle(json: unknown): string {
  if (isObject(json)) {
    for (const key of ["title", "subject", "summary", "message", "text", "event", "name"]) {
      const value = str(json[key]);
      if (value !== null) return value.split("\n", 1)[0].slice(0, 200);
    }
  }
  return "JSON notification";
}

/** Alertmanager's webhook (version 4) or Grafana's (the same alert group, with orgId, title, state and message). */
function alertGroup(json: Raw): AlertGroup {
  const grafana = "orgId" in json || str(json.version) === "1";
  const alerts: AlertLine[] = [];
  for (const alert of json.alerts as unknown[]) {
    if (!isObject(alert)) continue;
    const labels = isObject(alert.labels) ? alert.labels : {};
    const annotations = isObject(alert.annotations) ? alert.annotations : {};
    const rest = Object.entries(labels)
      .filter(([k]) => k !== "alertname" && k !== "severity")
      .map(([k, v]) => `${k}=${String(v)}`);
    alerts.push({
      status: str(alert.status) ?? "firing",
      name: str(labels.alertname) ?? "alert",
      severity: severityOf(labels.severity),
      summary: str(annotations.summary) ?? str(annotations.description) ?? str(annotations.message),
      labels: rest.length > 0 ? rest.join(", ") : null,
      fingerprint: str(alert.fingerprint),
    });
  }
  const status: AlertStatus = str(json.status) === "resolved" ? "resolved" : "firing";
  const groupLabels = isObject(json.groupLabels) ? Object.values(json.groupLabels).map(String) : [];
  const names = [...new Set(alerts.map((a) => a.name))];
  const title =
    str(json.title) ??
    `${names.slice(0, 3).join(", ")}${names.length > 3 ? ` and ${names.length - 3} more` : ""}${groupLabels.length > 0 ? ` (${groupLabels.join(", ")})` : ""}`;
  const fingerprints = alerts
    .map((a) => `${a.fingerprint ?? a.name}:${a.status}`)
    .sort()
    .join(",");
  const groupKey = str(json.groupKey) ?? `${str(json.orgId) ?? ""}:${names.join(",")}`;
  return {
    kind: grafana ? "grafana" : "alertmanager",
    status,
    groupKey,
    dedupeKey: `${status}|${fingerprints}`,
    title: title || "alert group",
    severity: highest(alerts.map((a) => a.severity)),
    alerts,
  };
}

/** Uptime Kuma: `heartbeat.status` 0 is down, 1 up; a test notification has neither heartbeat nor monitor. */
function kumaGroup(json: Raw): AlertGroup {
  const monitor = isObject(json.monitor) ? json.monitor : null;
  const heartbeat = isObject(json.heartbeat) ? json.heartbeat : null;
  const name = str(monitor?.name) ?? "monitor";
  const beat = heartbeat ? heartbeat.status : null;
  const status: AlertStatus = beat === 0 ? "firing" : beat === 1 ? "resolved" : "info";
  const message = str(heartbeat?.msg) ?? str(json.msg);
  const id = str(monitor?.id);
  return {
    kind: "uptime-kuma",
    status,
    groupKey: id === null ? null : `kuma:${id}`,
    dedupeKey: id === null ? null : `${status}|${str(heartbeat?.time) ?? ""}`,
    title: status === "firing" ? `${name} is down` : status === "resolved" ? `${name} is up` : (str(json.msg) ?? name),
    severity: status === "firing" ? "critical" : "info",
    alerts: monitor
      ? [
          {
            status,
            name,
            severity: status === "firing" ? "critical" : null,
            summary: message,
            labels: str(monitor.url) ?? str(monitor.hostname),
            fingerprint: id,
          },
        ]
      : [],
  };
}
