/**
 * The Portkey OSS gateway as a peer: installed from the npm registry into bench/.peers/portkey
 * (gitignored; nothing of Portkey's is committed) when missing, and run under Node as its own
 * `npx @portkey-ai/gateway` would run it. Two adjustments, both upstream's own:
 * - `@hono/node-server` is pinned to 1.14.2 through npm overrides (newer versions make every
 *   answer fail with `TypeError: immutable`, Portkey issue #1389);
 * - streamed answers get a copy of the upstream Response before Portkey appends its headers to it
 *   (the same `TypeError: immutable` on Node for streams, fixed upstream in PR #1551's way). The
 *   patch is one expression in the built file; if the pinned build ever changes shape, streaming
 *   is reported as unavailable rather than measured wrong.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const PORTKEY_VERSION = "1.15.2";
const DIR = resolve(import.meta.dir, "../.peers/portkey");
const SERVER = join(DIR, "node_modules/@portkey-ai/gateway/build/start-server.js");
const UNPATCHED = "r?(i=t,c=s)";
const PATCHED = "r?(i=this.context.isStreaming?new Response(t.body,{status:t.status,statusText:t.statusText,headers:new Headers(t.headers)}):t,c=s)";

export interface PortkeyInstall {
  /** argv that starts the gateway on a port. */
  command: (port: number) => string[];
  /** False when the streaming patch could not be applied. */
  streaming: boolean;
}

/** Installs (once) and patches Portkey; null with a reason when npm or node is unavailable. */
export async function installPortkey(): Promise<PortkeyInstall | { error: string }> {
  const node = Bun.which("node");
  const npm = Bun.which("npm");
  if (!node) return { error: "node is not on PATH" };
  const manifest = JSON.stringify({
    private: true,
    dependencies: { "@portkey-ai/gateway": PORTKEY_VERSION },
    overrides: { "@hono/node-server": "1.14.2" },
  });
  const manifestFile = join(DIR, "package.json");
  const current = existsSync(manifestFile) ? readFileSync(manifestFile, "utf8") : "";
  if (!existsSync(SERVER) || current !== manifest) {
    if (!npm) return { error: "npm is not on PATH" };
    mkdirSync(DIR, { recursive: true });
    writeFileSync(manifestFile, manifest);
    const proc = Bun.spawn([npm, "install", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: DIR, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0 || !existsSync(SERVER)) return { error: `npm install @portkey-ai/gateway@${PORTKEY_VERSION} failed: ${(out + err).trim().slice(-400)}` };
  }
  const source = readFileSync(SERVER, "utf8");
  if (source.includes(UNPATCHED)) writeFileSync(SERVER, source.replace(UNPATCHED, PATCHED));
  const streaming = source.includes(UNPATCHED) || source.includes(PATCHED);
  return { command: (port) => [node, SERVER, `--port=${port}`, "--headless"], streaming };
}

/** The headers that make Portkey forward to an OpenAI-compatible base URL. */
export function portkeyHeaders(upstreamBaseUrl: string): Record<string, string> {
  return {
    "x-portkey-provider": "openai",
    "x-portkey-custom-host": upstreamBaseUrl,
    authorization: "Bearer sk-bench-unused",
  };
}
