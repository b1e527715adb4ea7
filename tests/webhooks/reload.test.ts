// Against the compiled binary: SIGHUP swaps the webhook endpoints and the [[jobs]] handlers. A
// call whose handler is running when the handler's table changes finishes under the old table;
// the next call runs the new one; a new endpoint takes requests at once.
import { afterEach, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort, startGateway, type RunningGateway } from "../support/binary";
import { sendWebhook, webhooksToml } from "../support/webhook-binary";
import { eventually } from "../support/eventually";

let gateway: RunningGateway | null = null;
afterEach(async () => {
  if (gateway && gateway.proc.exitCode === null) await gateway.stop();
  gateway = null;
});

/** A handler that marks its start, waits for the file `go`, then writes the body to `<tag>-<call id>`. */
function handler(tag: string): string {
  const script = `touch started-$X_GATEWAY_CALL_ID; while [ ! -e go ]; do sleep 0.05; done; cat > part-$X_GATEWAY_CALL_ID; mv part-$X_GATEWAY_CALL_ID ${tag}-$X_GATEWAY_CALL_ID`;
  return `[[jobs]]\njob_id = 3\ncommand = ["sh", "-c", ${JSON.stringify(script)}]\n`;
}

test("a reload swaps the endpoints and the job handlers; a running call finishes under its old handler", async () => {
  const port = freePort();
  gateway = await startGateway(`${webhooksToml(port)}\n${handler("v1")}`);
  const { dir } = gateway;
  const hooks = `http://127.0.0.1:${port}`;
  const status = async (): Promise<number> => ((await (await fetch(`${gateway!.url}/api/status`)).json()) as { config_reloads: number }).config_reloads;

  expect((await sendWebhook(hooks, '{"n":1}')).status).toBe(202);
  expect(await eventually(() => existsSync(join(dir, "started-1")), 10_000)).toBe(true);

  const other = `[[webhooks.endpoints]]\npath = "/hooks/other"\njob_id = 4\n`;
  writeFileSync(
    join(dir, "modelgate.toml"),
    `[server]\nlisten = "127.0.0.1:${gateway.port}"\ndata_dir = "${join(dir, "data")}"\n${webhooksToml(port)}\n${other}\n${handler("v2")}`,
  );
  gateway.proc.kill("SIGHUP");
  expect(await eventually(async () => (await status()) === 1, 10_000)).toBe(true);
  expect((await fetch(`${hooks}/hooks/other`, { method: "POST", body: "x" })).status).toBe(202);

  writeFileSync(join(dir, "go"), "");
  expect(await eventually(() => existsSync(join(dir, "v1-1")), 10_000)).toBe(true);
  expect(readFileSync(join(dir, "v1-1"), "utf8")).toBe('{"n":1}');

  expect((await sendWebhook(hooks, '{"n":3}')).status).toBe(202);
  expect(await eventually(() => existsSync(join(dir, "v2-3")), 10_000)).toBe(true);
  expect(readFileSync(join(dir, "v2-3"), "utf8")).toBe('{"n":3}');
  expect(existsSync(join(dir, "v1-3"))).toBe(false);
}, 60_000);
