// The served app is built by the first request that needs it (src/generation.ts): a gateway that
// has answered only /api/health, /v1/models and model calls holds none of it. Against the compiled
// binary, each kind of request is the first one after start-up, and works: a chat, the dashboard,
// Swagger and its document, /metrics, /api/status, a webhook; several at once share one build;
// /api/health and /v1/models, served without the app, answer as the app's routes do; and after a
// reload the new config's app is the one built.
import { afterAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { createUserKey, freePort, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream } from "../support/mock-upstream";
import { sendWebhook, webhooksToml } from "../support/webhook-binary";

const upstream = startMockUpstream();
const running: RunningGateway[] = [];
afterAll(async () => {
  for (const gateway of running) if (gateway.proc.exitCode === null) await gateway.stop("SIGKILL");
  upstream.stop();
});

function modelsToml(extra = ""): string {
  return `${extra}
[[upstreams]]
name = "mock"
base_url = "${upstream.url}"

[[models]]
id = "free-model"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]
`;
}

/** A gateway that has answered /api/health and nothing else. */
async function fresh(toml = modelsToml()): Promise<RunningGateway> {
  const gateway = await startGateway(toml);
  running.push(gateway);
  return gateway;
}

describe("the first request of each kind after start-up", () => {
  test("a chat completion, through the official SDK with a key the CLI made", async () => {
    const gateway = await fresh();
    const client = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: (await createUserKey(gateway)).key, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: "free-model", messages: [{ role: "user", content: "hi" }] });
    expect(completion.choices[0]?.message.content).toBeString();
    await gateway.stop();
  });

  test("the dashboard sends a visitor to its sign-in page", async () => {
    const gateway = await fresh();
    const response = await fetch(`${gateway.url}/dashboard`, { redirect: "manual" });
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toStartWith("/dashboard/signin");
    expect(response.headers.get("x-request-id")).toStartWith("req_");
    await gateway.stop();
  });

  test("Swagger UI, then its OpenAPI document with the health route", async () => {
    const gateway = await fresh();
    const page = await fetch(`${gateway.url}/swagger`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("swagger-ui");
    const doc = (await (await fetch(`${gateway.url}/swagger/json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toContain("/api/health");
    expect(Object.keys(doc.paths)).toContain("/v1/chat/completions");
    await gateway.stop();
  });

  test("/metrics", async () => {
    const gateway = await fresh();
    const response = await fetch(`${gateway.url}/metrics`);
    expect(response.status).toBe(200);
    expect(await response.text()).toContain("# TYPE ");
    await gateway.stop();
  });

  test("an unknown path is a 404 in OpenAI's error shape", async () => {
    const gateway = await fresh();
    const response = await fetch(`${gateway.url}/nowhere`);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("not_found");
    await gateway.stop();
  });

  test("a signed webhook is accepted", async () => {
    const port = freePort();
    const gateway = await fresh(`${webhooksToml(port)}\n${modelsToml()}`);
    const response = await sendWebhook(`http://127.0.0.1:${port}`, JSON.stringify({ first: true }));
    expect(response.status).toBe(202);
    await gateway.stop();
  });

  test("several at once share one build, and each gets its own answer", async () => {
    const gateway = await fresh();
    const paths = ["/api/status", "/metrics", "/swagger/json", "/dashboard", "/nowhere", "/api/status"];
    const responses = await Promise.all(paths.map((path) => fetch(`${gateway.url}${path}`, { redirect: "manual" })));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 303, 404, 200]);
    const ids = responses.map((r) => r.headers.get("x-request-id"));
    expect(new Set(ids).size).toBe(paths.length);
    expect(((await responses[0]!.json()) as { models: number }).models).toBe(1);
    await gateway.stop();
  });
});

describe("/api/health and /v1/models without the app", () => {
  test("answers as the app's route does: body, request id, framing and sniffing headers", async () => {
    const gateway = await fresh();
    const plain = await fetch(`${gateway.url}/api/health`);
    // A trailing slash is not the Bun route: the app answers it.
    const framed = await fetch(`${gateway.url}/api/health/`);
    for (const response of [plain, framed]) {
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toStartWith("application/json");
      expect(response.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]+$/);
      expect(response.headers.get("x-frame-options")).toBe("DENY");
      expect(response.headers.get("x-content-type-options")).toBe("nosniff");
      const body = (await response.json()) as Record<string, unknown>;
      expect(Object.keys(body).sort()).toEqual(["commit", "status", "timestamp", "version"]);
      expect(body.status).toBe("ok");
    }
    await gateway.stop();
  });

  test("/v1/models lists what the app's route lists, and a key's model allowlist hides the rest", async () => {
    const gateway = await fresh(`${modelsToml()}
[[models]]
id = "other-model"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]
`);
    const plain = await fetch(`${gateway.url}/v1/models`);
    const framed = await fetch(`${gateway.url}/v1/models/`);
    expect(plain.headers.get("x-frame-options")).toBe("DENY");
    expect(plain.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]+$/);
    const ids = (response: { data: { id: string }[] }): string[] => response.data.map((m) => m.id).sort();
    const plainBody = (await plain.json()) as { object: string; data: { id: string }[] };
    expect(plainBody.object).toBe("list");
    expect(ids(plainBody)).toEqual(["free-model", "other-model"]);
    expect(ids((await framed.json()) as { data: { id: string }[] })).toEqual(["free-model", "other-model"]);
    expect((await gateway.cli(["user", "add", "kept@example.com"])).code).toBe(0);
    const created = await gateway.cli(["key", "create", "--user", "kept@example.com", "--name", "one", "--models", "free-model"]);
    expect(created.code).toBe(0);
    const kept = await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${created.stdout.trim()}` } });
    expect(ids((await kept.json()) as { data: { id: string }[] })).toEqual(["free-model"]);
    await gateway.stop();
  });

  test("carries the CORS headers of an allowed origin", async () => {
    const gateway = await fresh(modelsToml('[server]\ncors_origins = ["https://app.example"]'));
    const response = await fetch(`${gateway.url}/api/health`, { headers: { origin: "https://app.example" } });
    expect(response.headers.get("access-control-allow-origin")).toBe("https://app.example");
    const other = await fetch(`${gateway.url}/api/health`, { headers: { origin: "https://other.example" } });
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    await gateway.stop();
  });
});

test("after a reload, the first page is built over the new config", async () => {
  const gateway = await fresh();
  // The first config's app is built, then the file gains a model and is read again.
  expect(((await (await fetch(`${gateway.url}/api/status`)).json()) as { models: number }).models).toBe(1);
  const file = join(gateway.dir, "modelgate.toml");
  const written = await Bun.file(file).text();
  writeFileSync(file, `${written}\n[[models]]\nid = "second-model"\nfree = true\ntargets = [{ upstream = "mock", model = "mock-small" }]\n`);
  gateway.proc.kill("SIGHUP");
  const deadline = Date.now() + 10_000;
  let models = 1;
  while (models !== 2 && Date.now() < deadline) {
    await Bun.sleep(50);
    models = ((await (await fetch(`${gateway.url}/api/status`)).json()) as { models: number }).models;
  }
  expect(models).toBe(2);
  const list = (await (await fetch(`${gateway.url}/v1/models`)).json()) as { data: { id: string }[] };
  expect(list.data.map((m) => m.id)).toContain("second-model");
  await gateway.stop();
});
