/**
 * Runs Debian's nginx or caddy in the foreground with the example config from examples/nginx or
 * examples/caddy, rendered for a test: only the gateway's address and the proxy's own listen
 * address change (each must be found in the example, so an example that drifts fails here), every
 * other directive is the example's. State, pid and logs go to a fresh temporary directory.
 * scripts/ensure-debian.sh installs both when missing.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { freePort } from "./binary";

const NGINX_EXAMPLE = resolve(import.meta.dir, "../../examples/nginx/modelgate.conf");
const CADDY_EXAMPLE = resolve(import.meta.dir, "../../examples/caddy/Caddyfile");
/** Where the examples expect the gateway. */
const EXAMPLE_GATEWAY = "127.0.0.1:8080";

export interface RunningProxy {
  url: string;
  /** The config as the proxy read it. */
  config: string;
  output(): string;
  stop(): Promise<void>;
}

export function ensureReverseProxies(): void {
  const ensured = Bun.spawnSync(["bash", resolve(import.meta.dir, "../../scripts/ensure-debian.sh"), "nginx:/usr/sbin/nginx", "caddy:caddy"], {
    stdout: "inherit",
    stderr: "inherit",
  });
  if (ensured.exitCode !== 0) throw new Error("nginx or caddy is missing and could not be installed");
}

/** `text` with `from` replaced by `to`, failing when the example no longer holds `from`. */
function replaceRequired(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`the example no longer contains ${JSON.stringify(from)}; update tests/support/reverse-proxy.ts`);
  return text.split(from).join(to);
}

export async function startNginx(options: { gatewayPort: number; example?: string }): Promise<RunningProxy> {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-nginx-"));
  const port = freePort();
  let site = options.example ?? readFileSync(NGINX_EXAMPLE, "utf8");
  site = replaceRequired(site, `server ${EXAMPLE_GATEWAY};`, `server 127.0.0.1:${options.gatewayPort};`);
  site = replaceRequired(site, "listen 80;", `listen 127.0.0.1:${port};`);
  writeFileSync(join(dir, "modelgate.conf"), site);
  // The main context a distribution's nginx.conf would give, with every path inside `dir`.
  // Started as root, nginx's workers would switch to an unprivileged user who cannot reach `dir`.
  const main = `${process.getuid?.() === 0 ? "user root;\n" : ""}worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  include ${dir}/modelgate.conf;
}
`;
  writeFileSync(join(dir, "nginx.conf"), main);
  const nginx = Bun.which("nginx") ?? "/usr/sbin/nginx";
  const proc = Bun.spawn([nginx, "-p", `${dir}/`, "-e", `${dir}/error.log`, "-c", join(dir, "nginx.conf"), "-g", "daemon off;"], {
    stdout: "pipe",
    stderr: "pipe",
  });
  return await running(proc, { url: `http://127.0.0.1:${port}`, config: site, log: join(dir, "error.log") });
}

export async function startCaddy(options: { gatewayPort: number; example?: string }): Promise<RunningProxy> {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-caddy-"));
  const port = freePort();
  let site = options.example ?? readFileSync(CADDY_EXAMPLE, "utf8");
  site = replaceRequired(site, `reverse_proxy ${EXAMPLE_GATEWAY} `, `reverse_proxy 127.0.0.1:${options.gatewayPort} `);
  // Plain http on a loopback port instead of the example's name (which would fetch a certificate).
  site = replaceRequired(site, "gateway.example.com {", `http://127.0.0.1:${port} {`);
  // A global option only: no admin endpoint (a fixed port shared by every instance).
  const file = join(dir, "Caddyfile");
  writeFileSync(file, `{\n\tadmin off\n}\n\n${site}`);
  const env = { ...process.env, HOME: dir, XDG_DATA_HOME: join(dir, "data"), XDG_CONFIG_HOME: join(dir, "config") };
  const proc = Bun.spawn(["caddy", "run", "--config", file, "--adapter", "caddyfile"], { stdout: "pipe", stderr: "pipe", env });
  return await running(proc, { url: `http://127.0.0.1:${port}`, config: site });
}

/** Waits until the proxy answers /api/health from the gateway behind it. */
async function running(proc: Subprocess<"ignore", "pipe", "pipe">, where: { url: string; config: string; log?: string }): Promise<RunningProxy> {
  let output = "";
  const collect = async (stream: ReadableStream<Uint8Array>): Promise<void> => {
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) output += new TextDecoder().decode(chunk);
  };
  void collect(proc.stdout);
  void collect(proc.stderr);
  const logged = (): string => output + (where.log === undefined ? "" : readFileSync(where.log, { encoding: "utf8", flag: "a+" }));
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`the proxy exited with ${proc.exitCode}:\n${logged()}`);
    try {
      if ((await fetch(`${where.url}/api/health`)).ok) break;
    } catch {}
    if (Date.now() > deadline) {
      proc.kill();
      throw new Error(`the proxy did not pass /api/health through:\n${logged()}`);
    }
    await Bun.sleep(20);
  }
  return {
    url: where.url,
    config: where.config,
    output: logged,
    stop: async () => {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}
