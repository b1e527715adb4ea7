/**
 * What a build says it is, against the compiled binary: the release from package.json and the
 * commit `make build` stamped in, the same in `modelgate version`, /api/health and /api/status;
 * and each migration a start applies, logged by name.
 */
import { afterAll, expect, test } from "bun:test";
import { BINARY, startGateway, type RunningGateway } from "../support/binary";
import { migrations } from "../../src/db/migrations.gen";
import pkg from "../../package.json";

const gateways: RunningGateway[] = [];
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop();
});

/** The commit this checkout is at, as the Makefile stamps it ("unknown" outside git). */
function headCommit(): string {
  const git = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { cwd: import.meta.dir });
  return git.exitCode === 0 ? git.stdout.toString().trim() : "unknown";
}

test("version, /api/health and /api/status name the release and the commit of the build", async () => {
  const commit = headCommit();
  const printed = Bun.spawnSync([BINARY, "version"]).stdout.toString();
  expect(printed).toStartWith(`modelgate ${pkg.version} (commit ${commit}, interface `);
  const gateway = await startGateway();
  gateways.push(gateway);
  const health = (await (await fetch(`${gateway.url}/api/health`)).json()) as Record<string, unknown>;
  expect({ version: health.version, commit: health.commit }).toEqual({ version: pkg.version, commit });
  const status = (await (await fetch(`${gateway.url}/api/status`)).json()) as Record<string, unknown>;
  expect({ version: status.version, commit: status.commit }).toEqual({ version: pkg.version, commit });
  expect(status.database).toEqual({ engine: "sqlite" });
  expect(gateway.output()).toContain(`"msg":"modelgate ${pkg.version} (commit ${commit}) listening on `);
});

test("each migration applied at start is logged by name, once; a restart applies and logs none", async () => {
  const gateway = await startGateway();
  const applied = (output: string): string[] =>
    output
      .split("\n")
      .filter((line) => line.includes("database: applied migration "))
      .map((line) => JSON.parse(line) as { level: string; msg: string })
      .map(({ level, msg }) => `${level} ${msg}`);
  expect(applied(gateway.output())).toEqual(migrations.map((m) => `info database: applied migration ${m.tag}`));
  await gateway.stop();
  const again = await startGateway("", { dir: gateway.dir });
  gateways.push(again);
  expect(applied(again.output())).toEqual([]);
});
