/**
 * For the triage tests against the binary: local receivers standing in for Slack, Discord, ntfy,
 * Gotify and Matrix (and a generic webhook), each refusing with a 400 a request that does not
 * follow its service's documented format, and a real Alertmanager (Debian's
 * prometheus-alertmanager) whose receiver is modelgate's webhook ingress.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { freePort } from "../support/binary";

export const ALERTMANAGER = process.env.ALERTMANAGER_PATH ?? "/usr/bin/prometheus-alertmanager";
export const GOTIFY_TOKEN = "gotify-app-token-1";
export const MATRIX_TOKEN = "matrix-access-token-1";

type Service = "slack" | "discord" | "ntfy" | "gotify" | "matrix" | "webhook";

interface Received {
  service: Service;
  /** What a person would read: the text the message carries. */
  text: string;
  headers: Record<string, string>;
  body: any;
}

export interface Receivers {
  url: string;
  received: Received[];
  /** Services answering 503 until set back to false. */
  down: Set<Service>;
  of(service: Service): Received[];
  stop(): void;
}

function refuse(why: string): Response {
  return new Response(why, { status: 400 });
}

async function jsonOf(request: Request): Promise<any | Response> {
  if (!request.headers.get("content-type")?.startsWith("application/json")) return refuse("content-type must be application/json");
  try {
    return await request.json();
  } catch {
    return refuse("invalid JSON");
  }
}

export function startReceivers(): Receivers {
  const received: Received[] = [];
  const down = new Set<Service>();
  const matrixTxns = new Map<string, string>();
  const record = (service: Service, text: string, request: Request, body: unknown): void => {
    received.push({ service, text, headers: Object.fromEntries(request.headers), body });
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(request) {
      const path = new URL(request.url).pathname;
      const service: Service | null = path.startsWith("/slack/")
        ? "slack"
        : path.startsWith("/discord/")
          ? "discord"
          : path.startsWith("/ntfy/")
            ? "ntfy"
            : path.startsWith("/gotify/")
              ? "gotify"
              : path.startsWith("/_matrix/")
                ? "matrix"
                : path.startsWith("/hook")
                  ? "webhook"
                  : null;
      if (service === null) return new Response("not found", { status: 404 });
      if (down.has(service)) return new Response("unavailable", { status: 503 });
      if (service === "slack") {
        // Slack incoming webhooks: POST JSON with `text`; the answer is the text "ok".
        if (request.method !== "POST") return refuse("POST only");
        const body = await jsonOf(request);
        if (body instanceof Response) return body;
        if (typeof body.text !== "string" || body.text === "") return refuse("no_text");
        record("slack", body.text, request, body);
        return new Response("ok");
      }
      if (service === "discord") {
        // Discord webhooks: POST JSON with `content` (at most 2000 characters); 204 without ?wait.
        const body = await jsonOf(request);
        if (body instanceof Response) return body;
        if (typeof body.content !== "string" || body.content.length === 0 || body.content.length > 2000) return refuse("content: 1 to 2000 characters");
        record("discord", body.content, request, body);
        return new Response(null, { status: 204 });
      }
      if (service === "ntfy") {
        // ntfy publish: the body is the message; Title, Priority (1-5) and Tags as headers.
        if (request.method !== "POST" && request.method !== "PUT") return refuse("POST or PUT");
        const text = await request.text();
        const priority = request.headers.get("priority");
        if (text === "") return refuse("empty message");
        if (priority !== null && !/^[1-5]$|^(min|low|default|high|max|urgent)$/.test(priority)) return refuse("bad priority");
        const title = request.headers.get("title") ?? "";
        const decoded = /^=\?UTF-8\?B\?(.*)\?=$/.exec(title);
        record("ntfy", `${decoded ? Buffer.from(decoded[1], "base64").toString() : title}\n${text}`, request, text);
        return Response.json({ id: crypto.randomUUID().slice(0, 12), event: "message", topic: path.slice("/ntfy/".length) });
      }
      if (service === "gotify") {
        // Gotify: POST /message with the app token (X-Gotify-Key or ?token=); JSON message, title, priority.
        if (request.method !== "POST" || !path.endsWith("/message")) return refuse("POST /message");
        const token = request.headers.get("x-gotify-key") ?? new URL(request.url).searchParams.get("token");
        if (token !== GOTIFY_TOKEN) return new Response(JSON.stringify({ error: "Unauthorized", errorCode: 401 }), { status: 401 });
        const body = await jsonOf(request);
        if (body instanceof Response) return body;
        if (typeof body.message !== "string" || (body.priority !== undefined && !Number.isInteger(body.priority)))
          return refuse("message and integer priority");
        record("gotify", `${body.title ?? ""}\n${body.message}`, request, body);
        return Response.json({ id: received.length, appid: 1, message: body.message });
      }
      if (service === "matrix") {
        // Matrix client-server API: PUT /_matrix/client/v3/rooms/{roomId}/send/m.room.message/{txnId}.
        const match = /^\/_matrix\/client\/v3\/rooms\/([^/]+)\/send\/m\.room\.message\/([^/]+)$/.exec(path);
        if (request.method !== "PUT" || !match) return refuse("PUT .../send/m.room.message/{txnId}");
        if (request.headers.get("authorization") !== `Bearer ${MATRIX_TOKEN}`)
          return Response.json({ errcode: "M_UNKNOWN_TOKEN", error: "Unknown token" }, { status: 401 });
        const body = await jsonOf(request);
        if (body instanceof Response) return body;
        if (body.msgtype !== "m.text" || typeof body.body !== "string") return refuse("m.text with a body");
        const txn = `${match[1]}/${match[2]}`;
        let eventId = matrixTxns.get(txn);
        if (eventId === undefined) {
          eventId = `$event${matrixTxns.size + 1}`;
          matrixTxns.set(txn, eventId);
          record("matrix", body.body, request, { ...body, room: decodeURIComponent(match[1]) });
        }
        return Response.json({ event_id: eventId });
      }
      if (path.startsWith("/hook/gone")) return new Response("no such hook", { status: 404 });
      const body = await jsonOf(request);
      if (body instanceof Response) return body;
      record("webhook", `${body.title}\n${body.text}`, request, body);
      return new Response(null, { status: 204 });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    received,
    down,
    of: (service) => received.filter((r) => r.service === service),
    stop: () => server.stop(true),
  };
}

export interface Alertmanager {
  url: string;
  proc: Subprocess;
  /** Posts alerts to its API (v2): each `{ labels, annotations?, endsAt? }`. */
  post(alerts: Array<{ labels: Record<string, string>; annotations?: Record<string, string>; endsAt?: string }>): Promise<void>;
  stop(): Promise<void>;
}

/** A real Alertmanager sending to `receiverUrl` with a bearer token, grouping by alertname, with tiny intervals. */
export async function startAlertmanager(receiverUrl: string, token: string): Promise<Alertmanager> {
  const dir = mkdtempSync(join(tmpdir(), "alertmanager-"));
  const port = freePort();
  writeFileSync(
    join(dir, "alertmanager.yml"),
    `route:
  receiver: modelgate
  group_by: ["alertname"]
  group_wait: 200ms
  group_interval: 1s
  repeat_interval: 2s
receivers:
  - name: modelgate
    webhook_configs:
      - url: "${receiverUrl}"
        send_resolved: true
        http_config:
          authorization:
            type: Bearer
            credentials: "${token}"
`,
  );
  const proc = Bun.spawn(
    [
      ALERTMANAGER,
      `--config.file=${join(dir, "alertmanager.yml")}`,
      `--storage.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--cluster.listen-address=",
    ],
    { stdout: "ignore", stderr: "pipe" },
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/-/ready`)).ok) break;
    } catch {}
    if (proc.exitCode !== null) throw new Error(`alertmanager exited with ${proc.exitCode}: ${await new Response(proc.stderr as ReadableStream).text()}`);
    if (Date.now() > deadline) throw new Error("alertmanager did not become ready");
    await Bun.sleep(50);
  }
  return {
    url,
    proc,
    async post(alerts) {
      const response = await fetch(`${url}/api/v2/alerts`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(alerts) });
      if (!response.ok) throw new Error(`alertmanager refused the alerts: ${response.status} ${await response.text()}`);
    },
    async stop() {
      proc.kill("SIGKILL");
      await proc.exited;
    },
  };
}
