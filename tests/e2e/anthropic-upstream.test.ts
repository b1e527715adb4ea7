/**
 * Anthropic's own API as a native Messages upstream, on the compiled binary over loopback: with
 * `api_key_header = "x-api-key"` the upstream's key goes as x-api-key (never as a bearer token),
 * beside the client's anthropic-version, which a mock demanding both, as Anthropic's API does,
 * accepts, whole, streamed and for count_tokens. The default still sends Authorization: Bearer.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

const UPSTREAM_KEY = "sk-ant-upstream-test-key";
let anthropicApi: MockUpstream;
let gw: RunningGateway;
let key: string;

beforeAll(async () => {
  anthropicApi = startMockUpstream({ anthropicKey: UPSTREAM_KEY });
  gw = await startGateway(`
[[upstreams]]
name = "anthropic"
base_url = "${anthropicApi.url}"
api_key = "${UPSTREAM_KEY}"
api_key_header = "x-api-key"
native = ["messages"]

[[upstreams]]
name = "bearer"
base_url = "${anthropicApi.url}"
api_key = "${UPSTREAM_KEY}"
native = ["messages"]

[[models]]
id = "claude"
targets = [{ upstream = "anthropic", model = "mock-small" }]
free = true

[[models]]
id = "claude-by-bearer"
targets = [{ upstream = "bearer", model = "mock-small" }]
free = true
`);
  key = (await createUserKey(gw)).key;
});

afterAll(async () => {
  await gw?.stop();
  anthropicApi?.stop();
});

const client = (): Anthropic => new Anthropic({ baseURL: gw.url, apiKey: key, maxRetries: 0 });
const hello = [{ role: "user" as const, content: "Hello" }];

describe('api_key_header = "x-api-key"', () => {
  test("a native upstream that takes its key only in x-api-key answers, whole, streamed and count_tokens", async () => {
    const message = await client().messages.create({ model: "claude", max_tokens: 50, messages: hello });
    expect(message.content[0]).toMatchObject({ type: "text", text: "Hello from the mock upstream." });
    const streamed = await client().messages.stream({ model: "claude", max_tokens: 50, messages: hello }).finalMessage();
    expect(streamed.stop_reason).toBe("end_turn");
    expect((await client().messages.countTokens({ model: "claude", messages: hello })).input_tokens).toBeGreaterThan(0);
    const sent = anthropicApi.requests.map((r): unknown[] => [r.path, r.headers["x-api-key"], r.headers.authorization ?? null]);
    expect(sent).toEqual([
      ["/v1/messages", UPSTREAM_KEY, null],
      ["/v1/messages", UPSTREAM_KEY, null],
      ["/v1/messages/count_tokens", UPSTREAM_KEY, null],
    ]);
  });

  test("by default the key goes as Authorization: Bearer, which such an upstream refuses", async () => {
    anthropicApi.requests.length = 0;
    const refused = await client()
      .messages.create({ model: "claude-by-bearer", max_tokens: 50, messages: hello })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(Anthropic.APIError);
    expect(anthropicApi.requests[0].headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
  });
});
