// Every auth mode, valid / invalid / missing, against the gateway's fetch handler; real senders'
// signatures (GitHub's published example vector, @octokit/webhooks-methods); the edge statuses.
import { afterAll, describe, expect, test } from "bun:test";
import { sign as octokitSign } from "@octokit/webhooks-methods";
import { signBody } from "../../src/webhooks/auth";
import { buildTestGateway } from "./support";

const GITHUB_SECRET = "It's a Secret to Everybody";
const GITHUB_PAYLOAD = "Hello, World!";
const GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

const t = buildTestGateway({
  max_body_bytes: 1024,
  endpoints: [
    { path: "/open", job_id: 1 },
    { path: "/bearer", job_id: 2, auth: "bearer", secret: "tok-123" },
    { path: "/hmac", job_id: 3, auth: "hmac-sha256", secret: "hmac-key" },
    { path: "/apikey", job_id: 4, auth: "api-key", secret: "key-abc" },
    { path: "/custom-key", job_id: 5, auth: "api-key", secret: "key-xyz", api_key_header: "X-Custom-Auth" },
    { path: "/github", job_id: 6, auth: "hmac-sha256", secret: GITHUB_SECRET },
  ],
});
afterAll(() => t.close());

async function expectAccepted(response: Response, jobId: number): Promise<number> {
  expect(response.status).toBe(202);
  const body = (await response.json()) as { status: string; job_id: number; call_id: number };
  expect(body.status).toBe("accepted");
  expect(body.job_id).toBe(jobId);
  expect(Number.isInteger(body.call_id)).toBe(true);
  return body.call_id;
}

async function expectUnauthorized(response: Response): Promise<void> {
  expect(response.status).toBe(401);
  expect(await response.json()).toEqual({ error: "unauthorized" });
}

describe("auth modes", () => {
  test("none accepts any request", async () => {
    await expectAccepted(await t.post("/open", "anything"), 1);
  });

  test("bearer: valid, wrong, missing, wrong scheme", async () => {
    await expectAccepted(await t.post("/bearer", "x", { authorization: "Bearer tok-123" }), 2);
    await expectUnauthorized(await t.post("/bearer", "x", { authorization: "Bearer tok-124" }));
    await expectUnauthorized(await t.post("/bearer", "x", { authorization: "Bearer tok-1234" }));
    await expectUnauthorized(await t.post("/bearer", "x"));
    await expectUnauthorized(await t.post("/bearer", "x", { authorization: "Basic tok-123" }));
  });

  test("hmac-sha256: each accepted header, with and without the sha256= prefix", async () => {
    const body = '{"alert":"disk full"}';
    const hex = signBody("hmac-key", body);
    for (const header of ["X-Signature-256", "X-Hub-Signature-256", "X-Webhook-Signature"]) {
      await expectAccepted(await t.post("/hmac", body, { [header]: `sha256=${hex}` }), 3);
      await expectAccepted(await t.post("/hmac", body, { [header]: hex }), 3);
    }
    await expectAccepted(await t.post("/hmac", body, { "X-Signature-256": `SHA256=${hex.toUpperCase()}` }), 3);
  });

  test("hmac-sha256: wrong key, tampered body, non-hex, missing header", async () => {
    const body = '{"alert":"disk full"}';
    await expectUnauthorized(await t.post("/hmac", body, { "X-Signature-256": `sha256=${signBody("other-key", body)}` }));
    await expectUnauthorized(await t.post("/hmac", `${body} `, { "X-Signature-256": `sha256=${signBody("hmac-key", body)}` }));
    await expectUnauthorized(await t.post("/hmac", body, { "X-Signature-256": "sha256=zz" }));
    await expectUnauthorized(await t.post("/hmac", body));
  });

  test("api-key: X-API-Key by default", async () => {
    await expectAccepted(await t.post("/apikey", "x", { "X-API-Key": "key-abc" }), 4);
    await expectUnauthorized(await t.post("/apikey", "x", { "X-API-Key": "key-abd" }));
    await expectUnauthorized(await t.post("/apikey", "x"));
  });

  test("api-key: custom header named by api_key_header", async () => {
    await expectAccepted(await t.post("/custom-key", "x", { "x-custom-auth": "key-xyz" }), 5);
    await expectUnauthorized(await t.post("/custom-key", "x", { "X-API-Key": "key-xyz" }));
    await expectUnauthorized(await t.post("/custom-key", "x", { "X-Custom-Auth": "wrong" }));
  });
});

describe("real senders' signatures", () => {
  test("GitHub's published example vector, byte for byte", async () => {
    expect(`sha256=${signBody(GITHUB_SECRET, GITHUB_PAYLOAD)}`).toBe(GITHUB_SIGNATURE);
    const callId = await expectAccepted(await t.post("/github", GITHUB_PAYLOAD, { "X-Hub-Signature-256": GITHUB_SIGNATURE }), 6);
    const row = t.outbox.sqlite.query<{ body: Uint8Array }, [number]>("SELECT body FROM webhook_jobs WHERE call_id = ?").get(callId)!;
    expect(Buffer.from(row.body).equals(Buffer.from(GITHUB_PAYLOAD))).toBe(true);
  });

  test("a signature made by @octokit/webhooks-methods", async () => {
    const payload = JSON.stringify({ action: "opened", number: 7, pull_request: { title: "Ünïcödé ✓" } });
    const signature = await octokitSign(GITHUB_SECRET, payload);
    expect(signature.startsWith("sha256=")).toBe(true);
    await expectAccepted(await t.post("/github", payload, { "X-Hub-Signature-256": signature, "X-GitHub-Event": "pull_request" }), 6);
    await expectUnauthorized(await t.post("/github", payload, { "X-Hub-Signature-256": await octokitSign("not the secret", payload) }));
  });
});

describe("edge statuses", () => {
  test("GET /webhooks/health answers ok", async () => {
    const response = await t.request("/webhooks/health");
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("ok");
  });

  test("every answer carries its own x-request-id, as the API's do (regression: none had one)", async () => {
    const answers = [await t.request("/webhooks/health"), await t.post("/open", "x"), await t.post("/nope", "x"), await t.request("/open", { method: "GET" })];
    expect(answers.map((r) => r.status)).toEqual([200, 202, 404, 405]);
    const ids = answers.map((r) => r.headers.get("x-request-id"));
    for (const id of ids) expect(id).toMatch(/^req_[0-9a-f]{32}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  test("unknown path is 404, other methods are 405 with Allow", async () => {
    expect((await t.post("/nope", "x")).status).toBe(404);
    for (const method of ["GET", "PUT", "DELETE", "PATCH"]) {
      const response = await t.request("/open", { method });
      expect(response.status).toBe(405);
      expect(response.headers.get("allow")).toBe("POST");
    }
  });

  test("a body over max_body_bytes is 413, with Content-Length and when chunked", async () => {
    const big = "x".repeat(1025);
    const declared = await t.post("/open", big);
    expect(declared.status).toBe(413);
    const chunks = [new TextEncoder().encode("x".repeat(600)), new TextEncoder().encode("y".repeat(600))];
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = chunks.shift();
        if (next) controller.enqueue(next);
        else controller.close();
      },
    });
    const chunked = await t.request("/open", { method: "POST", body: stream });
    expect(chunked.status).toBe(413);
    expect(await chunked.json()).toEqual({ error: "payload_too_large", limit: 1024 });
    expect((await t.post("/open", "x".repeat(1024))).status).toBe(202);
  });

  test("the 401 is decided before anything is stored", async () => {
    const before = t.outbox.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM webhook_jobs").get()!.n;
    await expectUnauthorized(await t.post("/bearer", "x", { authorization: "Bearer nope" }));
    await expectUnauthorized(await t.post("/hmac", "x", { "X-Signature-256": `sha256=${"0".repeat(64)}` }));
    const after = t.outbox.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM webhook_jobs").get()!.n;
    expect(after).toBe(before);
  });
});
