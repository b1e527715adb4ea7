// Records build/serve.order, the profile `make build` lays the binary's bytecode out by
// (--bytecode-order; docs/benchmarks.md, "Footprint"): the functions a gateway runs from exec to
// healthy first, then those of its first chat requests, plain and streamed, against the mock
// upstream. Bun places them together at the front of the embedded bytecode, so an idle gateway
// touches fewer of its pages. A profile from an older build still applies to the functions that
// did not change; `make bytecode-order` records it again after large changes.
import { copyFileSync, existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BINARY, freePort } from "../tests/support/binary";
import { startMockUpstream } from "../tests/support/mock-upstream";

const OUT = new URL("../build/serve.order", import.meta.url).pathname;

const upstream = startMockUpstream();
const dir = mkdtempSync(join(tmpdir(), "modelgate-order-"));
const port = freePort();
const file = join(dir, "modelgate.toml");
writeFileSync(
  file,
  `[server]\nlisten = "127.0.0.1:${port}"\ndata_dir = "${join(dir, "data")}"\n\n[[upstreams]]\nname = "mock"\nbase_url = "${upstream.url}"\n\n[[models]]\nid = "m"\nfree = true\ntargets = [{ upstream = "mock", model = "mock-small" }]\n`,
);
const recorded = join(dir, "serve.order");
const env = { ...process.env, MODELGATE_CONFIG: file, BUN_BYTECODE_ORDER_OUT: recorded };
const proc = Bun.spawn([BINARY, "serve"], { cwd: dir, env, stdout: "ignore", stderr: "inherit", stdin: "ignore" });
const url = `http://127.0.0.1:${port}`;
const deadline = Date.now() + 10_000;
while (
  !(await fetch(`${url}/api/health`).then(
    (r) => r.ok,
    () => false,
  ))
) {
  if (proc.exitCode !== null || Date.now() > deadline) throw new Error("modelgate did not become healthy");
  await Bun.sleep(5);
}
for (const stream of [false, true, false, true]) {
  const body = JSON.stringify({ model: "m", stream, messages: [{ role: "user", content: "hi" }] });
  const response = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
  if (!response.ok) throw new Error(`chat answered ${response.status}: ${await response.text()}`);
  await response.text();
}
proc.kill("SIGTERM");
await proc.exited;
upstream.stop();
if (!existsSync(recorded)) throw new Error(`${BINARY} wrote no profile: was it built with --bytecode?`);
copyFileSync(recorded, OUT);
console.log(`wrote ${OUT}`);
