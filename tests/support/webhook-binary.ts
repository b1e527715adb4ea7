/**
 * The webhook ingress of the compiled binary: its config (one HMAC endpoint feeding job 3) and a
 * correctly signed POST to it.
 */
import { signBody } from "../../src/webhooks/auth";

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
