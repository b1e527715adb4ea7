/**
 * The webhook ingress of the compiled binary: its config (one HMAC endpoint feeding job 3), a
 * correctly signed POST to it, and the outbox read back from the gateway's database (the SQLite
 * file in its data directory, or its Postgres database).
 */
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { SQL } from "bun";
import { signBody } from "../../src/webhooks/auth";
import type { RunningGateway } from "./binary";

export const WEBHOOK_SECRET = "durable-secret";

/** The [webhooks] tables, listening on `port`; `extra` is more keys for the [webhooks] table. */
export function webhooksToml(port: number, extra = ""): string {
  return `[webhooks]
enabled = true
bind_address = "127.0.0.1:${port}"
lease_ms = 500
${extra}
[[webhooks.endpoints]]
path = "/hooks/alert"
job_id = 3
auth = "hmac-sha256"
secret = "${WEBHOOK_SECRET}"
name = "Alerts"
`;
}

/** POSTs `body` to the endpoint at `hooks` (the ingress's base URL) with its HMAC signature. */
export function sendWebhook(hooks: string, body: string): Promise<Response> {
  return fetch(`${hooks}/hooks/alert`, {
    method: "POST",
    body,
    headers: { "X-Hub-Signature-256": `sha256=${signBody(WEBHOOK_SECRET, body)}`, "content-type": "application/json" },
  });
}

/** Every call in the outbox, call_id to body; read with the process gone (after kill -9) on SQLite. */
export async function outboxBodies(gateway: Pick<RunningGateway, "dir" | "databaseUrl">): Promise<Map<number, string>> {
  if (gateway.databaseUrl !== null) {
    const sql = new SQL({ url: gateway.databaseUrl, max: 1 });
    try {
      const rows = (await sql`SELECT call_id, body FROM webhook_jobs`) as { call_id: string | number; body: Uint8Array }[];
      return new Map(rows.map((row) => [Number(row.call_id), Buffer.from(row.body).toString()]));
    } finally {
      await sql.close();
    }
  }
  const db = new Database(join(gateway.dir, "data", "modelgate.db"));
  try {
    const rows = db.query<{ call_id: number; body: Uint8Array }, []>("SELECT call_id, body FROM webhook_jobs").all();
    return new Map(rows.map((row) => [row.call_id, Buffer.from(row.body).toString()]));
  } finally {
    db.close();
  }
}
