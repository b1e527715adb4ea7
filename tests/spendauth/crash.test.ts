/**
 * A SpendAuth payment survives `kill -9` of the compiled binary: once its answer has reached the
 * client, the same signed header is a replay after the restart (one payment, one answer), and the
 * served authorization is in the settlement queue to be claimed. Allowlist mode (no chain): the
 * client signs with a local key.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream } from "../support/mock-upstream";
import { payWithHeader } from "../support/paid-load";
import { SPEND_AUTH_TOML, signedHeader } from "./helpers";

const upstream = startMockUpstream();
const started: RunningGateway[] = [];
afterAll(async () => {
  for (const gw of started) if (gw.proc.exitCode === null) await gw.stop("SIGKILL");
  upstream.stop();
});

const CONFIG = `
[[upstreams]]
name = "mock"
base_url = "${upstream.url}"

[[models]]
id = "paid"
targets = [{ upstream = "mock", model = "mock-small" }]
price = { prompt = 1.0, completion = 2.0 }

${SPEND_AUTH_TOML}`;

const ROUNDS = 5;

const BODY = { model: "paid", messages: [{ role: "user", content: "hello" }], max_tokens: 20 };

describe("SpendAuth across kill -9", () => {
  test("a header served just before the process was killed is a replay after the restart, and its payment is queued", async () => {
    let gw = await startGateway(CONFIG);
    started.push(gw);
    const dir = gw.dir;
    const headers: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const value = await signedHeader({ nonce: BigInt(round), amount: 10_000_000n });
      headers.push(value);
      expect(await payWithHeader(gw, { value, body: BODY })).toEqual({ status: 200, code: null });
      await gw.stop("SIGKILL");
      gw = await startGateway(CONFIG, { dir });
      started.push(gw);
      expect(await payWithHeader(gw, { value, body: BODY })).toEqual({ status: 401, code: "nonce_replay" });
    }
    await gw.stop("SIGKILL");
    const db = new Database(join(dir, "data", "modelgate.db"), { readonly: true });
    const queued = db.query("SELECT nonce FROM settlements ORDER BY nonce").all() as Array<{ nonce: string }>;
    db.close();
    expect(queued.map((row) => row.nonce)).toEqual(headers.map((_, round) => String(round)));
  }, 120_000);
});
