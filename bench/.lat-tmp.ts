import { freePort } from "../tests/support/binary";
import { BENCH_PAID_MODEL, createApiKey, startModelgate } from "./peers/modelgate";
import { answers, killOnExit, pinTo, spawnServer, startMock } from "./processes";
import { writeFileSync } from "node:fs";
pinTo(process.pid, "1");
const { url: mockUrl } = await startMock(freePort(), "0");
const flushes = (process.env.FLUSHES ?? "100,10").split(",");
const gws: { name: string; url: string; key: string }[] = [];
for (const f of flushes) {
  process.env.MG_FLUSH_MS = f;
  const g = await startModelgate(mockUrl, "/tmp/exp/modelgate");
  killOnExit(g.proc); pinTo(g.proc.pid, "0");
  gws.push({ name: `flush ${f} ms`, url: g.url, key: (await createApiKey(g))! });
}
const pp = freePort();
await spawnServer([process.execPath, "bench/proxy-floor.ts", String(pp), mockUrl.replace("/v1", "")], answers(`http://127.0.0.1:${pp}/v1/models`), "0");
gws.push({ name: "floor", url: `http://127.0.0.1:${pp}`, key: "x" });
const body = JSON.stringify({ model: BENCH_PAID_MODEL, messages: [{ role: "user", content: "Say hello in one short sentence." }] });
function wrk(url: string, key: string, c: number, d: number) {
  writeFileSync("/tmp/exp/post.lua", `wrk.method="POST"\nwrk.body=[[${body}]]\nwrk.headers["content-type"]="application/json"\nwrk.headers["authorization"]="Bearer ${key}"\n`);
  const out = Bun.spawnSync(["taskset", "-c", "1", "wrk", "-t1", `-c${c}`, `-d${d}s`, "--latency", "-s", "/tmp/exp/post.lua", `${url}/v1/chat/completions`]).stdout.toString();
  const pct = (p: string) => { const m = out.match(new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`)); if (!m) return NaN; const v = Number(m[1]); return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v; };
  return { p50: pct("50"), p99: pct("99"), rps: Number(out.match(/Requests\/sec:\s+([\d.]+)/)?.[1]) };
}
for (const g of gws) wrk(g.url, g.key, 1, 1);
const C = Number(process.env.C ?? 1), D = Number(process.env.D ?? 3), R = Number(process.env.R ?? 6);
const res: Record<string, { p50: number; p99: number; rps: number }[]> = {};
for (let r = 0; r < R; r++) for (const g of (r % 2 ? [...gws].reverse() : gws)) (res[g.name] ??= []).push(wrk(g.url, g.key, C, D));
const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor((a.length - 1) / 2)];
for (const [n, rs] of Object.entries(res)) console.log(n, `c=${C}`, "p50", med(rs.map((x) => x.p50)).toFixed(3), "p99", med(rs.map((x) => x.p99)).toFixed(3), "p99s", rs.map((x) => x.p99.toFixed(2)).join(" "), "rps", med(rs.map((x) => x.rps)).toFixed(0));
process.exit(0);
