/**
 * Claude Code and Codex CLI, unmodified, through the compiled binary: `claude -p` with
 * ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (POST /v1/messages) and `codex exec` with the gateway as
 * its model provider (POST /v1/responses), in front of the mock upstream.
 * Translated (the upstream speaks only chat completions): each agent answers a plain prompt with
 * the mock's text; runs a tool loop (the scripted mock calls the agent's own file tool, Claude
 * Code's Read or Codex's exec_command, the agent runs it in a temporary directory, sends the result
 * back and prints the mock's final text); and, with a key without credits, prints the gateway's
 * 402 and stops. Native (the upstream lists the API in `native`): the agent's requests pass
 * through as it sent them. Either way the user is debited what the upstream reported, the request
 * log names the endpoint, and the agent reaches nothing beyond loopback. What they send:
 * docs/agents.md.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createUserKey, startGateway, type RunningGateway, type UserKey } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { scriptedAnswer, SCRIPTED_COMPLETION_TOKENS } from "../support/agent-script";
import { AGENT_RUN_TIMEOUT_MS, runClaude, runCodex, type AgentOptions, type AgentRun } from "../support/agents";

/** Credits per 1M tokens, so micro-credits per token. */
const PRICE = { prompt: 1000, completion: 2000 };
const GRANT = 1000;
const PLAIN_WORDS = ["Plain", " answer", " from", " the", " chat", " mock."];
const NATIVE_WORDS = ["Native", " answer", " passed", " through."];

let mock: MockUpstream;
let nativeMock: MockUpstream;
let gw: RunningGateway;

beforeAll(async () => {
  mock = startMockUpstream({ words: PLAIN_WORDS });
  nativeMock = startMockUpstream({ words: NATIVE_WORDS });
  gw = await startGateway(`
[routing]
retry_backoff_ms = 0

[[upstreams]]
name = "chat-only"
base_url = "${mock.url}"

[[models]]
id = "agent-model"
targets = [{ upstream = "chat-only", model = "mock-small" }]
price = { prompt = ${PRICE.prompt}, completion = ${PRICE.completion} }

[[upstreams]]
name = "speaks-both"
base_url = "${nativeMock.url}"
native = ["messages", "responses"]

[[models]]
id = "agent-native"
targets = [{ upstream = "speaks-both", model = "mock-large" }]
price = { prompt = ${PRICE.prompt}, completion = ${PRICE.completion} }
`);
});

afterAll(async () => {
  await gw?.stop();
  mock?.stop();
  nativeMock?.stop();
});

interface Agent {
  name: string;
  run: (options: AgentOptions) => Promise<AgentRun>;
  endpoint: string;
  /**
   * Where a native upstream is sent the agent's request, the usage it reports for it, and request
   * headers of the agent's the upstream needs to read the body (each with a part of its value).
   */
  native: { path: string; reported: (body: Record<string, any>) => [number, number]; headers: Record<string, string> };
}

const PROMPT = "Say something plain.";

const AGENTS: Agent[] = [
  {
    name: "Claude Code",
    run: runClaude,
    endpoint: "messages",
    native: {
      path: "/v1/messages",
      reported: (body) => [Math.max(1, JSON.stringify(body.messages).length >> 2), NATIVE_WORDS.length],
      // Claude Code's body uses beta features (context_management, effort, deferred tools).
      headers: { "anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219" },
    },
  },
  {
    name: "Codex",
    run: runCodex,
    endpoint: "responses",
    native: { path: "/v1/responses", reported: (body) => [Math.max(1, JSON.stringify(body.input).length >> 2), NATIVE_WORDS.length], headers: {} },
  },
];

/** A workspace with a note whose text only the agent's tool can have read. */
function workspace(): { cwd: string; secret: string } {
  const cwd = mkdtempSync(join(tmpdir(), "agent-work-"));
  const secret = `note-${crypto.randomUUID()}`;
  writeFileSync(join(cwd, "note.txt"), `${secret}\n`);
  return { cwd, secret };
}

/** The bodies an upstream was sent at `path` since it had `start` requests. */
function sentSince(upstream: MockUpstream, start: number, path: string): Array<Record<string, any>> {
  return upstream.requests
    .slice(start)
    .filter((request) => request.path === path)
    .map((request) => request.body);
}

/** The prompt tokens the chat mock reports for a request (its scripted answers count them the same way). */
const chatPromptTokens = (body: Record<string, any>): number => JSON.stringify(body.messages).length >> 2;

interface UsageRow {
  endpoint: string;
  status: number;
  tokens_in: number;
  tokens_out: number;
  credits: string;
}

const micro = (credits: string): number => Math.round(Number(credits) * 1_000_000);

/**
 * The user's request log holds one row per upstream answer, under the agent's endpoint, with the
 * [prompt, completion] tokens the upstream reported, each charged at the route's price, and the
 * balance is the grant less their sum. Log rows and debits are written behind the answers.
 */
async function expectChargedAsReported(user: UserKey, endpoint: string, reported: Array<[number, number]>): Promise<void> {
  let rows: UsageRow[] = [];
  for (let i = 0; i < 100 && rows.length < reported.length; i++) {
    rows = JSON.parse((await gw.cli(["usage", "export", "--user", user.email, "--format", "json"])).stdout) as UsageRow[];
    if (rows.length < reported.length) await Bun.sleep(100);
  }
  expect(rows.map((row) => [row.endpoint, row.status, row.tokens_in, row.tokens_out])).toEqual(
    reported.map(([input, output]) => [endpoint, 200, input, output]),
  );
  for (const row of rows) expect(micro(row.credits)).toBe(row.tokens_in * PRICE.prompt + row.tokens_out * PRICE.completion);
  const spent = rows.reduce((sum, row) => sum + micro(row.credits), 0);
  expect(spent).toBeGreaterThan(0);
  const expected = `${((GRANT * 1_000_000 - spent) / 1_000_000).toFixed(6)} credits`;
  let balance = "";
  for (let i = 0; i < 50 && !balance.includes(expected); i++) {
    balance = (await gw.cli(["credits", "balance", "--user", user.email])).stdout;
    if (!balance.includes(expected)) await Bun.sleep(100);
  }
  expect(balance).toContain(expected);
}

/** The agent's output, for a failing assertion to show. */
const shown = (run: AgentRun): string => `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr.slice(-3000)}`;

describe.each(AGENTS)("$name through the gateway, upstream speaking only chat completions", (agent) => {
  let user: UserKey;
  let start = 0;

  beforeAll(async () => {
    user = await createUserKey(gw, { credits: String(GRANT) });
  });

  test(
    "a plain prompt is answered with the upstream's text",
    async () => {
      start = mock.requests.length;
      const run = await agent.run({ gateway: gw.url, key: user.key, model: "agent-model", prompt: PROMPT, cwd: workspace().cwd });
      expect(run.code, shown(run)).toBe(0);
      expect(run.outside).toEqual([]);
      expect(run.stdout, shown(run)).toContain(PLAIN_WORDS.join(""));
      const sent = sentSince(mock, start, "/v1/chat/completions");
      expect(sent.length).toBe(1);
      expect(sent[0]!.model).toBe("mock-small");
      expect(JSON.stringify(sent[0]!.messages)).toContain(PROMPT);
    },
    AGENT_RUN_TIMEOUT_MS + 5_000,
  );

  test(
    "a tool loop: the upstream calls the agent's tool, gets its result back, and its final text is printed",
    async () => {
      const { cwd, secret } = workspace();
      const finalText = `Done reading ${crypto.randomUUID()}`;
      mock.behaviour.answer = scriptedAnswer({
        calls: [
          { name: "Read", arguments: { file_path: join(cwd, "note.txt") } },
          { name: "exec_command", arguments: { cmd: "cat note.txt" } },
        ],
        finalText,
      });
      const before = mock.requests.length;
      try {
        const run = await agent.run({ gateway: gw.url, key: user.key, model: "agent-model", prompt: "What does note.txt say?", cwd });
        expect(run.code, shown(run)).toBe(0);
        expect(run.outside).toEqual([]);
        expect(run.stdout, shown(run)).toContain(finalText);
      } finally {
        mock.behaviour.answer = undefined;
      }
      const sent = sentSince(mock, before, "/v1/chat/completions");
      expect(sent.length).toBe(2);
      const toolMessages = (sent[1]!.messages as Array<{ role: string; tool_call_id?: string; content: unknown }>).filter((m) => m.role === "tool");
      expect(toolMessages.length).toBe(1);
      expect(toolMessages[0]!.tool_call_id).toBe("call_scripted_1");
      expect(JSON.stringify(toolMessages[0]!.content)).toContain(secret);
    },
    AGENT_RUN_TIMEOUT_MS + 5_000,
  );

  test(
    "a key without credits: the agent prints the gateway's 402 and its reason, and stops; the upstream is not called",
    async () => {
      const broke = await createUserKey(gw, {});
      const before = mock.requests.length;
      const run = await agent.run({ gateway: gw.url, key: broke.key, model: "agent-model", prompt: PROMPT, cwd: workspace().cwd });
      expect(run.code, shown(run)).not.toBe(0);
      expect(run.outside).toEqual([]);
      expect(`${run.stdout}${run.stderr}`, shown(run)).toContain("402");
      expect(`${run.stdout}${run.stderr}`, shown(run)).toContain("Your credit balance is 0.000000");
      expect(mock.requests.length).toBe(before);
    },
    AGENT_RUN_TIMEOUT_MS + 5_000,
  );

  test("each request is charged the usage the upstream reported, and logged under the agent's endpoint", async () => {
    const sent = sentSince(mock, start, "/v1/chat/completions");
    expect(sent.length).toBe(3);
    const completions = [PLAIN_WORDS.length, SCRIPTED_COMPLETION_TOKENS, SCRIPTED_COMPLETION_TOKENS];
    await expectChargedAsReported(
      user,
      agent.endpoint,
      sent.map((body, i) => [chatPromptTokens(body), completions[i]!]),
    );
  });
});

describe.each(AGENTS)("$name through the gateway, upstream serving its API natively", (agent) => {
  // The native mocks may answer with a call of the first tool offered before their text (the
  // Responses mock always does): every turn must then pass through natively too.
  test(
    "the agent's requests are passed through as it sent them, with the headers the body needs; its text printed, each charged and logged",
    async () => {
      const user = await createUserKey(gw, { credits: String(GRANT) });
      const start = nativeMock.requests.length;
      const run = await agent.run({ gateway: gw.url, key: user.key, model: "agent-native", prompt: PROMPT, cwd: workspace().cwd });
      expect(run.code, shown(run)).toBe(0);
      expect(run.outside).toEqual([]);
      expect(run.stdout, shown(run)).toContain(NATIVE_WORDS.join(""));
      expect(nativeMock.requests.slice(start).map((request) => request.path)).toEqual(Array(nativeMock.requests.length - start).fill(agent.native.path));
      for (const request of nativeMock.requests.slice(start)) {
        for (const [name, part] of Object.entries(agent.native.headers)) expect(`${name}: ${request.headers[name] ?? "(not sent)"}`).toContain(part);
      }
      const sent = sentSince(nativeMock, start, agent.native.path);
      expect(sent.length).toBeGreaterThan(0);
      for (const body of sent) {
        expect(body.model).toBe("mock-large");
        expect(JSON.stringify(body)).toContain(PROMPT);
      }
      await expectChargedAsReported(
        user,
        agent.endpoint,
        sent.map((body) => agent.native.reported(body)),
      );
    },
    AGENT_RUN_TIMEOUT_MS + 5_000,
  );
});
