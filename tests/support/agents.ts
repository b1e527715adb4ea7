/**
 * Runs the real coding agents, unmodified, against a gateway: Claude Code (`claude -p`) with
 * ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, and Codex (`codex exec`) with a model provider in its
 * own CODEX_HOME. Both are devDependencies (`make install` puts Claude Code's native binary in
 * place). Every run gets a fresh HOME, a clean environment, no retries and a bounded time; any
 * connection it tries beyond loopback goes through a proxy that refuses it at once and notes it,
 * so an agent never reaches the internet nor waits on it, and a test can see that it tried.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const BIN = resolve(import.meta.dir, "../../node_modules/.bin");

/** Each agent run is killed after this long (ms); a run of the scripted conversations takes a second or two. */
export const AGENT_RUN_TIMEOUT_MS = 60_000;

export interface AgentRun {
  code: number;
  stdout: string;
  stderr: string;
  /** The first line of every request the agent sent beyond loopback (through its proxy), e.g. `CONNECT host:443 HTTP/1.1`. */
  outside: string[];
}

export interface AgentOptions {
  /** The gateway's origin, e.g. http://127.0.0.1:PORT (no /v1). */
  gateway: string;
  key: string;
  model: string;
  prompt: string;
  /** The agent's working directory (its tools act there). */
  cwd: string;
}

/** `claude -p PROMPT` as a user runs it against a gateway: its two environment variables and a model name. */
export async function runClaude(options: AgentOptions): Promise<AgentRun> {
  const env = {
    ANTHROPIC_BASE_URL: options.gateway,
    ANTHROPIC_API_KEY: options.key,
    ANTHROPIC_MODEL: options.model,
    ANTHROPIC_SMALL_FAST_MODEL: options.model,
    // The documented switches that leave only the model requests.
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_ERROR_REPORTING: "1",
    // Claude Code retries a 401 or 5xx for minutes; a test wants the first answer.
    CLAUDE_CODE_MAX_RETRIES: "0",
  };
  return await run([join(BIN, "claude"), "-p", options.prompt], { cwd: options.cwd, env });
}

/** `codex exec PROMPT` with a config.toml naming the gateway as its model provider, the key in env_key. */
export async function runCodex(options: AgentOptions): Promise<AgentRun> {
  const home = mkdtempSync(join(tmpdir(), "codex-home-"));
  writeFileSync(join(home, "config.toml"), codexConfig({ baseUrl: `${options.gateway}/v1`, model: options.model }));
  const env = { CODEX_HOME: home, MODELGATE_API_KEY: options.key };
  return await run([join(BIN, "codex"), "exec", "--skip-git-repo-check", options.prompt], { cwd: options.cwd, env });
}

/**
 * The config.toml of docs/agents.md: the provider block, with Codex's retries off (a test wants the
 * first answer), and the two switches that keep it from fetching plugins (GitHub, chatgpt.com) and
 * sending analytics (ab.chatgpt.com).
 */
function codexConfig(options: { baseUrl: string; model: string }): string {
  return `model = "${options.model}"
model_provider = "modelgate"

[model_providers.modelgate]
name = "modelgate"
base_url = "${options.baseUrl}"
env_key = "MODELGATE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
`;
}

async function run(argv: string[], options: { cwd: string; env: Record<string, string> }): Promise<AgentRun> {
  const home = mkdtempSync(join(tmpdir(), "agent-home-"));
  mkdirSync(options.cwd, { recursive: true });
  const proxy = await refusingProxy();
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    TMPDIR: tmpdir(),
    HTTP_PROXY: proxy.url,
    HTTPS_PROXY: proxy.url,
    ALL_PROXY: proxy.url,
    NO_PROXY: "127.0.0.1,localhost",
    ...options.env,
  };
  try {
    const child = Bun.spawn(argv, {
      cwd: options.cwd,
      env,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      timeout: AGENT_RUN_TIMEOUT_MS,
      killSignal: "SIGTERM",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    return { code, stdout, stderr, outside: proxy.seen };
  } finally {
    proxy.close();
  }
}

/** A loopback HTTP proxy that answers every request, CONNECT included, with 403 and notes its first line. */
async function refusingProxy(): Promise<{ url: string; seen: string[]; close: () => void }> {
  const seen: string[] = [];
  const server = createServer((socket) => {
    socket.once("data", (data) => {
      seen.push(data.toString("latin1").split("\r\n", 1)[0]!);
      socket.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    });
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, seen, close: () => server.close() };
}
