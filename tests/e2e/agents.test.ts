/**
 * Claude Code and Codex CLI, unmodified, through the compiled binary: `claude -p` with
 * ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (POST /v1/messages) and `codex exec` with the gateway as
 * its model provider (POST /v1/responses), in front of the mock upstream. Translated: the upstream
 * speaks only chat completions. Each agent answers a plain prompt with the mock's text, and runs a
 * tool loop: the scripted mock calls the agent's own file tool (Claude Code's Read, Codex's
 * exec_command), the agent runs it in a temporary directory and sends the result back, and prints
 * the mock's final text. The user is debited what the upstream reported, and the request log names
 * the endpoint. What the agents send is written up in docs/agents.md.
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

let mock: MockUpstream;
let gw: RunningGateway;

beforeAll(async () => {
  mock = startMockUpstream({ words: PLAIN_WORDS });
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
`);
});

afterAll(async () => {
  await gw?.stop();
  mock?.stop();
});

interface Agent {
  name: string;
  run: (options: AgentOptions) => Promise<AgentRun>;
  endpoint: string;
  /** The prompt as the upstream finds it in a chat message. */
  prompt: string;
}

const AGENTS: Agent[] = [
  { name: "Claude Code", run: runClaude, endpoint: "messages", prompt: "Say something plain." },
  { name: "Codex", run: runCodex, endpoint: "responses", prompt: "Say something plain." },
];

/** A workspace with a note whose text only the agent's tool can have read. */
function workspace(): { cwd: string; secret: string } {
  const cwd = mkdtempSync(join(tmpdir(), "agent-work-"));
  const secret = `note-${crypto.randomUUID()}`;
  writeFileSync(join(cwd, "note.txt"), `${secret}\n`);
  return { cwd, secret };
}

function chatRequestsSince(start: number): Array<Record<string, any>> {
  return mock.requests.slice(start).filter((request) => request.path === "/v1/chat/completions").map((request) => request.body);
}

/** The text of every message of a chat request, whatever its content's shape. */
function messageText(body: Record<string, any>): string {
  return JSON.stringify(body.messages ?? []);
}

interface UsageRow {
  endpoint: string;
  status: number;
  tokens_in: number;
  tokens_out: number;
  credits: string;
}

/** The user's rows of the request log, once there are `count` (writes are behind the answers). */
async function usageRows(user: UserKey, count: number): Promise<UsageRow[]> {
  let rows: UsageRow[] = [];
  for (let i = 0; i < 100 && rows.length < count; i++) {
    const exported = await gw.cli(["usage", "export", "--user", user.email, "--format", "json"]);
    rows = JSON.parse(exported.stdout) as UsageRow[];
    if (rows.length < count) await Bun.sleep(100);
  }
  return rows;
}

async function balance(user: UserKey): Promise<string> {
  return (await gw.cli(["credits", "balance", "--user", user.email])).stdout.trim();
}

const micro = (credits: string): number => Math.round(Number(credits) * 1_000_000);

/** The agent's output, for a failing assertion to show. */
const shown = (run: AgentRun): string => `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr.slice(-3000)}`;

describe.each(AGENTS)("$name through the gateway, upstream speaking only chat completions", (agent) => {
  let user: UserKey;
  const start = { requests: 0 };

  beforeAll(async () => {
    user = await createUserKey(gw, { credits: String(GRANT) });
  });

  test("a plain prompt is answered with the upstream's text", async () => {
    mock.behaviour.answer = undefined;
    start.requests = mock.requests.length;
    const { cwd } = workspace();
    const run = await agent.run({ gateway: gw.url, key: user.key, model: "agent-model", prompt: agent.prompt, cwd });
    expect(run.code, shown(run)).toBe(0);
    expect(run.stdout, shown(run)).toContain(PLAIN_WORDS.join(""));
    const sent = chatRequestsSince(start.requests);
    expect(sent.length).toBe(1);
    expect(sent[0]!.model).toBe("mock-small");
    expect(messageText(sent[0]!)).toContain(agent.prompt);
  }, AGENT_RUN_TIMEOUT_MS + 5_000);

  test("a tool loop: the upstream calls the agent's tool, gets its result back, and its final text is printed", async () => {
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
      expect(run.stdout, shown(run)).toContain(finalText);
    } finally {
      mock.behaviour.answer = undefined;
    }
    const sent = chatRequestsSince(before);
    expect(sent.length).toBe(2);
    const toolMessages = (sent[1]!.messages as Array<{ role: string; tool_call_id?: string; content: unknown }>).filter((m) => m.role === "tool");
    expect(toolMessages.length).toBe(1);
    expect(toolMessages[0]!.tool_call_id).toBe("call_scripted_1");
    expect(JSON.stringify(toolMessages[0]!.content)).toContain(secret);
  }, AGENT_RUN_TIMEOUT_MS + 5_000);

  test("each request is charged the usage the upstream reported, and logged under the agent's endpoint", async () => {
    const sent = chatRequestsSince(start.requests);
    expect(sent.length).toBe(3);
    const rows = await usageRows(user, 3);
    expect(rows.map((row) => [row.endpoint, row.status])).toEqual(Array(3).fill([agent.endpoint, 200]));
    const reportedPrompt = sent.map((body) => JSON.stringify(body.messages).length >> 2);
    expect(rows.map((row) => row.tokens_in)).toEqual(reportedPrompt);
    expect(rows.map((row) => row.tokens_out)).toEqual([PLAIN_WORDS.length, SCRIPTED_COMPLETION_TOKENS, SCRIPTED_COMPLETION_TOKENS]);
    for (const row of rows) expect(micro(row.credits)).toBe(row.tokens_in * PRICE.prompt + row.tokens_out * PRICE.completion);
    const spent = rows.reduce((sum, row) => sum + micro(row.credits), 0);
    expect(spent).toBeGreaterThan(0);
    let shownBalance = "";
    const expected = ((GRANT * 1_000_000 - spent) / 1_000_000).toFixed(6);
    for (let i = 0; i < 50 && !shownBalance.includes(expected); i++) {
      shownBalance = await balance(user);
      await Bun.sleep(100);
    }
    expect(shownBalance).toContain(expected);
  });
});
