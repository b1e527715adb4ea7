/**
 * Key policy on the compiled binary over loopback, set with its own CLI while it runs: the `openai`
 * SDK with a restricted key, the client-address allowlist behind and not behind a trusted proxy,
 * a tiny budget under 50 concurrent streams, a tokens-per-minute burst, `key revoke` given the key
 * itself, and `usage export` parsed back against the ledger.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

let mock: MockUpstream;
let gw: RunningGateway;
let proxied: RunningGateway;

const config = (mockUrl: string, extra = "") => `
[server]
${extra}

[[upstreams]]
name = "mock"
base_url = "${mockUrl}"

[[models]]
id = "small-a"
targets = [{ upstream = "mock", model = "mock-small" }]
price = { prompt = 1, completion = 2 }

[[models]]
id = "large-b"
targets = [{ upstream = "mock", model = "mock-large" }]
price = { prompt = 3, completion = 4 }
`;

beforeAll(async () => {
  mock = startMockUpstream();
  gw = await startGateway(config(mock.url));
  proxied = await startGateway(config(mock.url, 'trusted_proxies = ["127.0.0.1"]'));
});

afterAll(async () => {
  await gw?.stop();
  await proxied?.stop();
  mock?.stop();
});

/** Runs the CLI and fails with its stderr unless it exits 0. */
async function cli(gateway: RunningGateway, args: string[]): Promise<string> {
  const result = await gateway.cli(args);
  if (result.code !== 0) throw new Error(`modelgate ${args.join(" ")} exited ${result.code}: ${result.stderr}`);
  return result.stdout;
}

/** Waits out the server's change poll (50 ms), so a CLI change is seen by the next request. */
const settle = (): Promise<void> => Bun.sleep(200);

const chat = (gateway: RunningGateway, key: string, headers: Record<string, string> = {}) =>
  fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}`, ...headers },
    body: JSON.stringify({ model: "small-a", messages: [{ role: "user", content: "hi" }] }),
  });

describe("the openai SDK with a restricted key", () => {
  test("the allowed model answers, the other raises PermissionDeniedError, and models.list omits it", async () => {
    const { key, id } = await createUserKey(gw, { credits: "10" });
    expect(await cli(gw, ["key", "update", id, "--models", "small-*"])).toContain("models small-*");
    await settle();
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 });
    const answer = await client.chat.completions.create({ model: "small-a", messages: [{ role: "user", content: "hi" }] });
    expect(answer.choices[0].message.content).toBeTruthy();
    const error = await client.chat.completions.create({ model: "large-b", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((error as InstanceType<typeof OpenAI.PermissionDeniedError>).code).toBe("model_not_allowed");
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual(["small-a"]);
    // An empty --models clears the allowlist, from the next request, without a restart.
    await cli(gw, ["key", "update", key, "--models", ""]);
    await settle();
    expect((await client.chat.completions.create({ model: "large-b", messages: [{ role: "user", content: "hi" }] })).choices).toHaveLength(1);
  });
});

describe("--allow-ip", () => {
  test("not behind a trusted proxy: the socket's address decides, X-Forwarded-For is ignored", async () => {
    const { key, id } = await createUserKey(gw, { credits: "10" });
    await cli(gw, ["key", "update", id, "--allow-ip", "10.0.0.0/8"]);
    await settle();
    const refused = await chat(gw, key, { "x-forwarded-for": "10.1.2.3" });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as any).error.code).toBe("ip_not_allowed");
    await cli(gw, ["key", "update", id, "--allow-ip", "10.0.0.0/8,127.0.0.1"]);
    await settle();
    expect((await chat(gw, key)).status).toBe(200);
  });

  test("behind a trusted proxy: the client that X-Forwarded-For names decides", async () => {
    const { key, id } = await createUserKey(proxied, { credits: "10" });
    await cli(proxied, ["key", "update", id, "--allow-ip", "10.0.0.0/8"]);
    await settle();
    expect((await chat(proxied, key, { "x-forwarded-for": "10.1.2.3" })).status).toBe(200);
    expect((await chat(proxied, key, { "x-forwarded-for": "192.168.1.7" })).status).toBe(403);
    expect((await chat(proxied, key)).status).toBe(403);
  });
});

test("50 concurrent streams on a tiny total budget spend at most the budget, whatever max_tokens they ask for", async () => {
  const { key, id } = await createUserKey(gw, { credits: "10" });
  await cli(gw, ["key", "update", id, "--budget", "0.0002/total"]);
  await settle();
  const stream = () =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "small-a", stream: true, max_tokens: 1_000_000_000, messages: [{ role: "user", content: "hi" }] }),
    }).then(async (r) => (await r.text(), r.status));
  const statuses = await Promise.all(Array.from({ length: 50 }, stream));
  expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
  expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
  // What the burst's reservations held and did not use is spent by later requests, until the budget is.
  let refused: Response | null = null;
  for (let i = 0; i < 50 && refused === null; i++) {
    const r = await chat(gw, key);
    if (r.status === 402) refused = r;
    else expect((await r.text(), r.status)).toBe(200);
  }
  const body = (await refused!.json()) as any;
  expect(body.error.code).toBe("budget_exceeded");
  expect(body.error.resets_at).toBeNull();
  const db = new Database(join(gw.dir, "data", "modelgate.db"), { readonly: true });
  try {
    const spent = db.query<{ micro: number }, [string]>("SELECT -SUM(micro) AS micro FROM ledger WHERE key_id = ?").get(id)!.micro;
    expect(spent).toBeGreaterThan(0);
    expect(spent).toBeLessThanOrEqual(200);
  } finally {
    db.close();
  }
});

test("a burst past the key's tokens per minute gets 429 with the x-ratelimit-*-tokens headers", async () => {
  const { key, id } = await createUserKey(gw, { credits: "10" });
  await cli(gw, ["key", "update", id, "--tokens-per-minute", "30"]);
  await settle();
  let refused: Response | null = null;
  for (let i = 0; i < 10 && refused === null; i++) {
    const r = await chat(gw, key);
    if (r.status === 429) refused = r;
    else expect((await r.text(), r.status)).toBe(200);
  }
  expect(refused?.status).toBe(429);
  expect(refused!.headers.get("x-ratelimit-limit-tokens")).toBe("30");
  expect(refused!.headers.get("x-ratelimit-remaining-tokens")).toBe("0");
  expect(refused!.headers.get("x-ratelimit-reset-tokens")).toMatch(/^(\d+m)?\d+s$/);
  expect(Number(refused!.headers.get("retry-after"))).toBeGreaterThan(0);
});

test("key revoke takes a leaked key itself, never prints it, and the key stops working", async () => {
  const { key, id } = await createUserKey(gw, { credits: "1" });
  expect((await chat(gw, key)).status).toBe(200);
  const result = await gw.cli(["key", "revoke", key]);
  expect(result.code).toBe(0);
  expect(result.stdout.trim()).toBe(`revoked ${id}`);
  expect(result.stdout + result.stderr).not.toContain(key);
  await settle();
  expect((await chat(gw, key)).status).toBe(401);
});

test("usage export: the CSV and the JSON parsed back have one row per request, and their credits sum to the ledger's debits", async () => {
  const gateway = await startGateway(config(mock.url));
  try {
    const a = await createUserKey(gateway, { credits: "10", name: 'first, "quoted"' });
    const b = await createUserKey(gateway, { email: a.email, name: "=second" });
    for (let i = 0; i < 7; i++) expect((await chat(gateway, i % 3 === 0 ? b.key : a.key)).status).toBe(200);
    expect(await gateway.stop()).toBe(0); // writes the request log's last rows
    const csv = await cli(gateway, ["usage", "export", "--format", "csv"]);
    const lines = csv.trimEnd().split("\r\n");
    expect(lines[0]).toBe("time,user,key_name,key_prefix,model,endpoint,status,tokens_in,tokens_out,credits,latency_ms,request_id");
    const rows = lines.slice(1).map(parseCsvLine);
    expect(rows).toHaveLength(7);
    expect(rows.filter((r) => r[2] === 'first, "quoted"')).toHaveLength(4);
    expect(rows.filter((r) => r[2] === "'=second")).toHaveLength(3);
    const json = JSON.parse(await cli(gateway, ["usage", "export", "--format", "json", "--key", b.key])) as Array<Record<string, string | number>>;
    expect(json).toHaveLength(3);
    const db = new Database(join(gateway.dir, "data", "modelgate.db"), { readonly: true });
    try {
      const ledger = db.query<{ micro: number; tokens: number }, []>("SELECT -SUM(micro) AS micro FROM ledger WHERE kind = 'debit'").get()!;
      const logged = db.query<{ tokens: number }, []>("SELECT SUM(prompt_tokens + completion_tokens) AS tokens FROM request_log").get()!;
      const micro = (text: string): number => Math.round(Number(text) * 1e6);
      expect(rows.reduce((sum, r) => sum + micro(r[9]), 0)).toBe(ledger.micro);
      expect(rows.reduce((sum, r) => sum + Number(r[7]) + Number(r[8]), 0)).toBe(logged.tokens);
      const byKey = db.query<{ micro: number }, [string]>("SELECT -SUM(micro) AS micro FROM ledger WHERE key_id = ?").get(b.id)!;
      expect(json.reduce((sum, r) => sum + micro(String(r.credits)), 0)).toBe(byKey.micro);
    } finally {
      db.close();
    }
  } finally {
    await gateway.stop();
  }
});

/** One CSV record (RFC 4180: quoted fields, doubled quotes). */
function parseCsvLine(line: string): string[] {
  const fields: string[] = [];
  let i = 0;
  while (i <= line.length) {
    if (line[i] === '"') {
      let value = "";
      i += 1;
      while (i < line.length && !(line[i] === '"' && line[i + 1] !== '"')) {
        value += line[i] === '"' ? '"' : line[i];
        i += line[i] === '"' ? 2 : 1;
      }
      fields.push(value);
      i += 2;
    } else {
      const end = line.indexOf(",", i);
      fields.push(line.slice(i, end === -1 ? line.length : end));
      i = end === -1 ? line.length + 1 : end + 1;
    }
  }
  return fields;
}
