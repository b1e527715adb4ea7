/**
 * Requests pipelined on one connection, against the compiled binary. Bun 1.4.5 closes a connection
 * when a request arrives on it while the previous one's handler is still pending, and answers
 * neither (docs/bun-pipelining.md). Whatever the moment the second request comes, the first may
 * have been run upstream, but it is not charged: it is recorded as 499 client_closed_request. A single request on the same raw socket is served and
 * charged, which is how the ledger is known to be up to date when it is checked.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { modelsToml } from "../auth/support";
import { eventually } from "../support/eventually";

let gateway: RunningGateway;
let upstream: MockUpstream;
let key: string;
let db: Database;

beforeAll(async () => {
  upstream = startMockUpstream();
  gateway = await startGateway(modelsToml(upstream.url));
  ({ key } = await createUserKey(gateway, { credits: "10" }));
  db = new Database(join(gateway.dir, "data", "modelgate.db"), { readonly: true });
});

afterAll(async () => {
  db?.close();
  await gateway?.stop();
  upstream?.stop();
});

function paidRequest(options: { stream?: boolean } = {}): string {
  const body = JSON.stringify({ model: "paid-model", max_tokens: 16, stream: options.stream ?? false, messages: [{ role: "user", content: "Hello" }] });
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** A raw connection: what it received, and a promise of its close. */
function open(): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    let received = "";
    const socket = connect(gateway.port, "127.0.0.1");
    const closed = new Promise<void>((done) => socket.on("close", () => done()));
    socket.on("data", (chunk) => (received += chunk.toString("latin1")));
    socket.on("error", () => {});
    socket.once("connect", () => resolve({ socket, received: () => received, closed }));
    socket.once("error", reject);
  });
}

function ledger(): { debits: number; balance: number } {
  const debits = (db.query("SELECT count(*) AS n FROM ledger WHERE kind = 'debit'").get() as { n: number }).n;
  const balance = (db.query("SELECT micro FROM balances").get() as { micro: number }).micro;
  return { debits, balance };
}

/**
 * The debits written since `before` other than that of one paid request sent alone now on a raw
 * connection, which must be answered 200: debits are written behind, in order, so once its debit
 * is in the ledger any earlier one is too.
 */
async function debitsBesidesOneServed(before: { debits: number }): Promise<number> {
  const conn = await open();
  conn.socket.write(paidRequest());
  expect(await eventually(() => conn.received().includes('"chat.completion"'), 5_000)).toBe(true);
  expect(conn.received()).toStartWith("HTTP/1.1 200");
  conn.socket.end();
  expect(await eventually(() => ledger().debits > before.debits, 5_000)).toBe(true);
  return ledger().debits - before.debits - 1;
}

/** The request log's statuses, oldest first. */
function logged(): number[] {
  return (db.query("SELECT status FROM request_log ORDER BY created_at").all() as { status: number }[]).map((r) => r.status);
}

test("two paid requests in one write: nothing is answered or charged; the first is logged as 499", async () => {
  const before = ledger();
  const conn = await open();
  conn.socket.write(paidRequest() + paidRequest());
  await conn.closed;
  expect(conn.received()).toBe("");
  expect(await eventually(() => logged().length === 1, 5_000)).toBe(true);
  expect(logged()).toEqual([499]);
  expect(await debitsBesidesOneServed(before)).toBe(0);
});

for (const stream of [false, true]) {
  test(`a second request while the first (${stream ? "streamed" : "JSON"}) waits on the upstream: the upstream's answer is neither delivered nor charged`, async () => {
    const before = ledger();
    const chats = upstream.chatCount();
    // Counted by status: the served request of the test before may still be on its way into the
    // request log (written behind), while its debit is already committed.
    const closedBefore = logged().filter((status) => status === 499).length;
    let release = (): void => {};
    upstream.behaviour.holdUntil = new Promise<void>((resolve) => (release = resolve));
    const conn = await open();
    conn.socket.write(paidRequest({ stream }));
    expect(await eventually(() => upstream.chatCount() === chats + 1, 5_000)).toBe(true);
    conn.socket.write(paidRequest({ stream }));
    await conn.closed;
    // Answered at once, before the gateway's client watch (a sweep every 200 ms) looks at the request.
    upstream.behaviour.holdUntil = undefined;
    release();
    expect(conn.received()).toBe("");
    expect(await eventually(() => logged().filter((status) => status === 499).length === closedBefore + 1, 5_000)).toBe(true);
    expect(await debitsBesidesOneServed(before)).toBe(0);
  });
}
