// The standard-webhooks auth mode: the reference library's published vector byte for byte (and
// the same signature computed here with node:crypto), requests signed by the `standardwebhooks`
// package as a sender signs them, refusals (wrong, missing, stale, future), replays folded on
// webhook-id for as long as a replay can pass the timestamp check, the config's errors, and the
// compiled binary end to end.
import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { createHmac } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { buildConfig, ConfigError } from "../../src/config/load";
import { dedupeWindowMs } from "../../src/webhooks";
import { WebhookGateway } from "../../src/webhooks/gateway";
import { signStandardWebhook, standardWebhooksKey } from "../../src/webhooks/standard-webhooks";
import { freePort, startGateway, type RunningGateway } from "../support/binary";
import { eventually } from "../support/eventually";
import { buildTestGateway } from "./support";

// The test vector of the reference JavaScript library (standard-webhooks, libraries/javascript).
const VECTOR = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};
const SECRET = `whsec_${Buffer.from("a Standard Webhooks key, 32 B...").toString("base64")}`;
const OTHER_SECRET = `whsec_${Buffer.from("another key that is not the one.").toString("base64")}`;

const t = buildTestGateway(
  {
    endpoints: [
      { path: "/sw", job_id: 21, auth: "standard-webhooks", secret: "env:SW_SECRET" },
      { path: "/sw-short", job_id: 22, auth: "standard-webhooks", secret: SECRET, tolerance_s: 10 },
      { path: "/bearer", job_id: 23, auth: "bearer", secret: "tok-123" },
      { path: "/hmac", job_id: 24, auth: "hmac-sha256", secret: "hmac-key" },
    ],
    // Shorter than a replay can stay on time: ids are still remembered twice the tolerance.
    dedupe_window_s: 1,
  },
  { env: { SW_SECRET: SECRET } },
);
const lines: Array<{ msg: string; fields?: Record<string, unknown> }> = [];
const logged = new WebhookGateway({
  config: t.config.webhooks,
  outbox: t.outbox,
  serviceId: 42,
  log: (_level, msg, fields) => void lines.push({ msg, fields }),
});
afterAll(() => t.close());

function post(path: string, body: string, headers: Record<string, string>): Promise<Response> {
  return logged.fetch(new Request(`http://localhost${path}`, { method: "POST", body, headers }));
}

/** The three headers as a sender makes them, signed by the `standardwebhooks` package. */
function signed(body: string, options: { id?: string; at?: number; secret?: string } = {}): Record<string, string> {
  const id = options.id ?? `msg_${crypto.randomUUID()}`;
  const at = options.at ?? t.clock.now();
  const signature = new Webhook(options.secret ?? SECRET).sign(id, new Date(at), body);
  return { "webhook-id": id, "webhook-timestamp": String(Math.floor(at / 1000)), "webhook-signature": signature };
}

function rows(jobId: number): number {
  return t.outbox.sqlite.query<{ n: number }, [number]>("SELECT count(*) AS n FROM webhook_jobs WHERE job_id = ?").get(jobId)!.n;
}

async function callId(response: Response): Promise<number> {
  expect(response.status).toBe(202);
  const reply = (await response.json()) as { status: string; job_id: number; call_id: number };
  expect(reply.status).toBe("accepted");
  return reply.call_id;
}

async function refused(response: Response): Promise<string> {
  expect(response.status).toBe(401);
  expect(await response.json()).toEqual({ error: "unauthorized" });
  const line = lines.find((l) => l.fields?.request_id === response.headers.get("x-request-id"));
  return String(line?.fields?.reason);
}

describe("signatures", () => {
  test("the reference library's vector, byte for byte: ours, node:crypto's, the package's", async () => {
    const key = Buffer.from(VECTOR.secret.slice("whsec_".length), "base64");
    const content = `${VECTOR.id}.${VECTOR.timestamp}.${VECTOR.body}`;
    expect(`v1,${createHmac("sha256", key).update(content).digest("base64")}`).toBe(VECTOR.signature);
    expect(signStandardWebhook(standardWebhooksKey(VECTOR.secret)!, VECTOR)).toBe(VECTOR.signature);
    expect(new Webhook(VECTOR.secret).sign(VECTOR.id, new Date(VECTOR.timestamp * 1000), VECTOR.body)).toBe(VECTOR.signature);
    const v = buildTestGateway({ endpoints: [{ path: "/v", job_id: 7, auth: "standard-webhooks", secret: VECTOR.secret }] });
    try {
      v.clock.advance(VECTOR.timestamp * 1000 - v.clock.now());
      const headers = { "webhook-id": VECTOR.id, "webhook-timestamp": String(VECTOR.timestamp), "webhook-signature": VECTOR.signature };
      const id = await callId(await v.post("/v", VECTOR.body, headers));
      const row = v.outbox.sqlite.query<{ body: Uint8Array }, [number]>("SELECT body FROM webhook_jobs WHERE call_id = ?").get(id)!;
      expect(Buffer.from(row.body).toString()).toBe(VECTOR.body);
    } finally {
      v.close();
    }
  });

  test("a signed request is 202 and stored once; the secret may come from env:", async () => {
    const before = rows(21);
    await callId(await post("/sw", '{"type":"user.created"}', signed('{"type":"user.created"}')));
    expect(rows(21)).toBe(before + 1);
  });

  test("several signatures (a secret being rotated): any valid v1 entry is enough", async () => {
    const body = '{"type":"invoice.paid"}';
    const headers = signed(body);
    const valid = headers["webhook-signature"];
    const stale = signed(body, { id: headers["webhook-id"], secret: OTHER_SECRET })["webhook-signature"];
    headers["webhook-signature"] = `${stale} v1a,${Buffer.alloc(64).toString("base64")} v2,${valid.slice(3)} ${valid}`;
    await callId(await post("/sw", body, headers));
    headers["webhook-signature"] = `${stale} v2,${valid.slice(3)}`;
    expect(await refused(await post("/sw", body, headers))).toBe("no v1 signature in webhook-signature matches");
  });
});

describe("refusals are 401 and store nothing", () => {
  const body = '{"type":"user.deleted"}';
  const cases: Array<[string, () => Record<string, string>, string]> = [
    ["another secret", () => signed(body, { secret: OTHER_SECRET }), "no v1 signature in webhook-signature matches"],
    ["another body", () => signed(`${body} `), "no v1 signature"],
    ["another id", () => ({ ...signed(body), "webhook-id": "msg_other" }), "no v1 signature"],
    ["another timestamp", () => ({ ...signed(body), "webhook-timestamp": String(Math.floor(t.clock.now() / 1000) + 1) }), "no v1 signature"],
    ["no webhook-id", () => ({ ...signed(body), "webhook-id": "" }), "no webhook-id header"],
    ["no timestamp or signature", () => ({ "webhook-id": "msg_1" }), "no webhook-timestamp, webhook-signature header"],
    ["a timestamp that is not whole seconds", () => ({ ...signed(body), "webhook-timestamp": "1.8e9" }), "webhook-timestamp is not whole seconds"],
    ["301 s old", () => signed(body, { at: t.clock.now() - 301_000 }), "is 301 s old, outside the 300 s tolerance"],
    ["301 s ahead", () => signed(body, { at: t.clock.now() + 301_000 }), "is 301 s ahead of this clock, outside the 300 s tolerance"],
  ];
  for (const [name, headers, reason] of cases) {
    test(name, async () => {
      const before = rows(21);
      const logged = await refused(await post("/sw", body, headers()));
      expect(logged).toContain(reason);
      expect(logged).not.toContain(SECRET.slice(6));
      expect(rows(21)).toBe(before);
    });
  }

  test("300 s either way is on time; tolerance_s narrows it", async () => {
    await callId(await post("/sw", body, signed(body, { at: t.clock.now() - 300_000 })));
    await callId(await post("/sw", body, signed(body, { at: t.clock.now() + 300_000 })));
    await callId(await post("/sw-short", body, signed(body, { at: t.clock.now() - 10_000 })));
    expect(await refused(await post("/sw-short", body, signed(body, { at: t.clock.now() - 11_000 })))).toContain("outside the 10 s tolerance");
  });

  test("what the headers decide is refused before the body is read (a stale replay of a large body costs nothing)", async () => {
    let pulled = 0;
    const body = (): ReadableStream<Uint8Array> =>
      new ReadableStream({ pull: (c) => (++pulled > 3 ? c.close() : c.enqueue(new Uint8Array(100))) }, { highWaterMark: 0 });
    const send = (path: string, headers: Record<string, string>) =>
      logged.fetch(new Request(`http://localhost${path}`, { method: "POST", body: body(), headers, duplex: "half" } as RequestInit));
    expect(await refused(await send("/sw", signed("", { at: t.clock.now() - 301_000 })))).toContain("outside the 300 s tolerance");
    expect(await refused(await send("/sw", { "webhook-id": "msg_1" }))).toBe("no webhook-timestamp, webhook-signature header");
    expect(await refused(await send("/hmac", {}))).toBe("no x-signature-256, x-hub-signature-256, x-webhook-signature header");
    expect(pulled).toBe(0);
    // With its headers in order, the body is read and the signature decides.
    expect(await refused(await send("/sw", signed("")))).toBe("no v1 signature in webhook-signature matches");
    expect(pulled).toBeGreaterThan(0);
  });

  test("the other modes' 401s say why in the log too", async () => {
    expect(await refused(await post("/bearer", "x", { authorization: "Bearer tok-124" }))).toBe("wrong bearer token");
  });
});

describe("replays fold on webhook-id", () => {
  test("the same request again, and the sender's retry signed anew, answer the first call_id; one row", async () => {
    const body = '{"type":"user.updated"}';
    const first = signed(body);
    const before = rows(21);
    const id = await callId(await post("/sw", body, first));
    expect(await callId(await post("/sw", body, first))).toBe(id);
    t.clock.advance(5_000);
    expect(await callId(await post("/sw", body, signed(body, { id: first["webhook-id"] })))).toBe(id);
    const concurrent = await Promise.all([1, 2, 3].map(() => post("/sw", body, first).then(callId)));
    expect(new Set(concurrent)).toEqual(new Set([id]));
    expect(rows(21)).toBe(before + 1);
  });

  test("an id is remembered as long as a replay can be on time, though dedupe_window_s is 1", async () => {
    const body = '{"type":"early"}';
    const headers = signed(body, { at: t.clock.now() + 300_000 });
    const id = await callId(await post("/sw", body, headers));
    t.clock.advance(599_000);
    expect(await callId(await post("/sw", body, headers))).toBe(id);
    t.clock.advance(2_000);
    expect(await refused(await post("/sw", body, headers))).toContain("s old, outside the 300 s tolerance");
  });
});

describe("config", () => {
  const endpoint = (extra: Record<string, unknown>) => ({
    webhooks: { enabled: true, endpoints: [{ path: "/sw", job_id: 1, auth: "standard-webhooks", ...extra }] },
  });
  function error(raw: Record<string, unknown>, env: Record<string, string> = {}): string {
    try {
      buildConfig(raw, { env });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error("expected a ConfigError");
  }
  const NOT_WHSEC = 'webhooks.endpoints[0].secret: a standard-webhooks secret is "whsec_" followed by base64';

  test("a secret that is not whsec_ base64 is refused naming the path, and not echoed", () => {
    const bare = SECRET.slice(6);
    // Without the prefix, empty, outside the alphabet, base64url, cut short.
    for (const secret of [bare, "whsec_", "whsec_not*base64", "whsec_YWJj-_8x", `whsec_${bare.slice(0, 41)}`]) {
      const message = error(endpoint({ secret }));
      expect(message).toStartWith(NOT_WHSEC);
      if (secret.length > 6) expect(message).not.toContain(secret.slice(6));
    }
    expect(error(endpoint({ secret: "env:SW" }), { SW: `${SECRET}\n` })).toStartWith(NOT_WHSEC);
    expect(error(endpoint({}))).toContain('webhooks.endpoints[0].secret: required for auth "standard-webhooks"');
  });

  test("tolerance_s: standard-webhooks only, 1 to 86400 s", () => {
    expect(error({ webhooks: { enabled: true, endpoints: [{ path: "/b", job_id: 1, auth: "bearer", secret: "tok-123", tolerance_s: 60 }] } })).toContain(
      'webhooks.endpoints[0].tolerance_s: only for auth "standard-webhooks"',
    );
    expect(error(endpoint({ secret: SECRET, tolerance_s: 0 }))).toStartWith("webhooks.endpoints[0].tolerance_s");
    expect(error(endpoint({ secret: SECRET, tolerance_s: 86_401 }))).toStartWith("webhooks.endpoints[0].tolerance_s");
  });

  test("dedupe_header may only name webhook-id, which the mode folds on anyway", () => {
    expect(error(endpoint({ secret: SECRET, dedupe_header: "X-Delivery" }))).toContain(
      "webhooks.endpoints[0].dedupe_header: standard-webhooks endpoints fold redeliveries on webhook-id",
    );
    expect(buildConfig(endpoint({ secret: SECRET, dedupe_header: "Webhook-Id" }), { env: {} }).config.webhooks.endpoints).toHaveLength(1);
  });

  test("in a Blueprint webhooks.toml, loaded and checked as inline, its errors naming the file", () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-sw-config-"));
    const file = join(dir, "webhooks.toml");
    const toml = (secret: string) =>
      `bind_address = "127.0.0.1:9091"\n\n[[endpoints]]\npath = "/hooks/clerk"\njob_id = 4\nauth = "standard-webhooks"\nsecret = "${secret}"\ntolerance_s = 120\n`;
    writeFileSync(file, toml(SECRET));
    const { config } = buildConfig({ webhooks: { enabled: true, config: "webhooks.toml" } }, { env: {}, baseDir: dir });
    expect(config.webhooks.endpoints).toEqual([{ path: "/hooks/clerk", job_id: 4, auth: "standard-webhooks", secret: SECRET, tolerance_s: 120 }]);
    writeFileSync(file, toml("whsec_?"));
    expect(error({ webhooks: { enabled: true, config: file } })).toStartWith(`${file}: endpoints[0].secret: a standard-webhooks secret`);
  });

  test("the dedupe window is dedupe_window_s, or twice the widest tolerance when that is longer", () => {
    const sw = { path: "/sw", job_id: 1, auth: "standard-webhooks" as const, secret: SECRET };
    expect(dedupeWindowMs({ dedupe_window_s: 86_400, endpoints: [sw] })).toBe(86_400_000);
    expect(dedupeWindowMs({ dedupe_window_s: 60, endpoints: [sw, { ...sw, tolerance_s: 400 }] })).toBe(800_000);
    expect(dedupeWindowMs({ dedupe_window_s: 60, endpoints: [sw] })).toBe(600_000);
    expect(dedupeWindowMs({ dedupe_window_s: 60, endpoints: [{ path: "/o", job_id: 2, auth: "none" }] })).toBe(60_000);
  });
});

describe("against the compiled binary", () => {
  const running: RunningGateway[] = [];
  afterAll(async () => {
    for (const gateway of running) if (gateway.proc.exitCode === null) await gateway.stop("SIGKILL");
  });

  test("a signed request is accepted once; its replay and its re-signed retry get the same call_id; a stale one is 401", async () => {
    const port = freePort();
    const config = `[webhooks]\nenabled = true\nbind_address = "127.0.0.1:${port}"\n\n[[webhooks.endpoints]]\npath = "/hooks/svix"\njob_id = 5\nauth = "standard-webhooks"\nsecret = "env:SVIX_SECRET"\n`;
    const gateway = await startGateway(config, { env: { SVIX_SECRET: SECRET }, args: ["--service-id", "9"] });
    running.push(gateway);
    const send = (headers: Record<string, string>, body: string) =>
      fetch(`http://127.0.0.1:${port}/hooks/svix`, { method: "POST", body, headers: { ...headers, "content-type": "application/json" } });
    const body = '{"type":"email.delivered","data":{"to":"ops@example.com"}}';
    const first = signed(body, { at: Date.now() });
    const id = await callId(await send(first, body));
    expect(await callId(await send(first, body))).toBe(id);
    expect(await callId(await send(signed(body, { id: first["webhook-id"], at: Date.now() + 1_000 }), body))).toBe(id);
    const stale = await send(signed(body, { at: Date.now() - 600_000 }), body);
    expect(stale.status).toBe(401);
    expect(await stale.json()).toEqual({ error: "unauthorized" });
    expect(await eventually(() => gateway.output().includes("outside the 300 s tolerance"))).toBe(true);
    expect(gateway.output()).not.toContain(SECRET.slice(6));
    const db = new Database(`${gateway.dir}/data/modelgate.db`, { readonly: true });
    const stored = db.query<{ call_id: number; body: Uint8Array }, []>("SELECT call_id, body FROM webhook_jobs WHERE job_id = 5").all();
    db.close();
    expect(stored.map((r) => [r.call_id, Buffer.from(r.body).toString()])).toEqual([[id, body]]);
  });
});
