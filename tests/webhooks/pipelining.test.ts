/**
 * Webhooks pipelined on one connection, against the compiled binary. Bun 1.4.5 closes a connection
 * when a request arrives on it while the previous one's handler is still pending, and answers
 * neither (docs/bun-pipelining.md): the sender, told nothing, sends again. So a call whose sender
 * is gone when its row would be committed is not stored: the outbox holds each call once the
 * sender has been told 202, and never one it was not told about.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { connect } from "node:net";
import { join } from "node:path";
import { signBody } from "../../src/webhooks/auth";
import { freePort, startGateway, type RunningGateway } from "../support/binary";

const SECRET = "pipelined-secret";
let gateway: RunningGateway;
let port: number;

beforeAll(async () => {
  port = freePort();
  gateway = await startGateway(
    `[webhooks]\nenabled = true\nbind_address = "127.0.0.1:${port}"\n[[webhooks.endpoints]]\npath = "/hooks/alert"\njob_id = 3\nauth = "hmac-sha256"\nsecret = "${SECRET}"\n`,
    { args: ["--service-id", "1"] },
  );
});

afterAll(async () => {
  await gateway?.stop();
});

function webhook(alert: string): string {
  const body = JSON.stringify({ status: "firing", alerts: [{ labels: { alertname: alert } }] });
  return `POST /hooks/alert HTTP/1.1\r\nHost: hooks\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha256=${signBody(SECRET, body)}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** Writes `bytes` on a new connection; what came back once the server closed it or said `until`. */
function exchange(bytes: string, until: string | null): Promise<string> {
  return new Promise((resolve) => {
    let received = "";
    const socket = connect(port, "127.0.0.1", () => socket.write(bytes));
    socket.on("data", (chunk) => {
      received += chunk.toString("latin1");
      if (until !== null && received.includes(until)) socket.end();
    });
    socket.on("error", () => {});
    socket.on("close", () => resolve(received));
  });
}

function storedAlerts(): string[] {
  const db = new Database(join(gateway.dir, "data", "modelgate.db"), { readonly: true });
  try {
    const rows = db.query("SELECT body FROM webhook_jobs ORDER BY call_id").all() as { body: Uint8Array }[];
    return rows.map((r) => JSON.parse(Buffer.from(r.body).toString()).alerts[0].labels.alertname);
  } finally {
    db.close();
  }
}

test("two webhooks in one write: neither is answered, and neither is stored; sent again one at a time, each is stored once", async () => {
  expect(await exchange(webhook("first") + webhook("second"), null)).toBe("");
  // Accepted after the pair: the outbox commits in order, so a row of the pair would be stored by now.
  expect(await exchange(webhook("alone"), '"accepted"')).toStartWith("HTTP/1.1 202");
  expect(storedAlerts()).toEqual(["alone"]);
  for (const alert of ["first", "second"]) expect(await exchange(webhook(alert), '"accepted"')).toStartWith("HTTP/1.1 202");
  expect(storedAlerts()).toEqual(["alone", "first", "second"]);
});
