/**
 * examples/systemd/modelgate.service is a unit systemd accepts (systemd-analyze verify, which
 * reports a misspelt or unknown setting without failing: any output fails here), that runs the
 * binary this build makes, with the settings docs/service.md relies on. systemd-analyze comes from
 * Debian's systemd package (scripts/ensure-debian.sh installs it when missing); nothing
 * is started.
 */
import { beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { BINARY } from "../support/binary";

const UNIT = resolve(import.meta.dir, "../../examples/systemd/modelgate.service");
const text = readFileSync(UNIT, "utf8");

beforeAll(() => {
  const ensured = Bun.spawnSync(["bash", resolve(import.meta.dir, "../../scripts/ensure-debian.sh"), "systemd:systemd-analyze"], {
    stdout: "inherit",
    stderr: "inherit",
  });
  if (ensured.exitCode !== 0) throw new Error("systemd-analyze is missing and could not be installed");
});

/** The unit with ExecStart naming this build's binary (verify checks that the program exists). */
function unitForThisBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-unit-"));
  const file = join(dir, "modelgate.service");
  writeFileSync(file, text.replace("ExecStart=/usr/local/bin/modelgate ", `ExecStart=${BINARY} `));
  return file;
}

function settings(): Map<string, string> {
  const found = new Map<string, string>();
  for (const line of text.split("\n")) {
    const match = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (match) found.set(match[1], match[2]);
  }
  return found;
}

test("systemd-analyze verify accepts the unit without a word", () => {
  const file = unitForThisBuild();
  expect(readFileSync(file, "utf8")).toContain(`ExecStart=${BINARY} serve`);
  const verify = Bun.spawnSync(["systemd-analyze", "verify", file]);
  expect({ code: verify.exitCode, output: verify.stdout.toString() + verify.stderr.toString() }).toEqual({ code: 0, output: "" });
});

test("the unit is hardened, stops job commands through the gateway, and keeps its state where the docs say", () => {
  const unit = settings();
  expect(unit.get("ExecStart")).toBe("/usr/local/bin/modelgate serve");
  expect(unit.get("Environment")).toBe("MODELGATE_CONFIG=/etc/modelgate/modelgate.toml");
  expect(unit.get("StateDirectory")).toBe("modelgate");
  expect(unit.get("User")).toBe("modelgate");
  expect(unit.get("ProtectSystem")).toBe("strict");
  expect(unit.get("NoNewPrivileges")).toBe("yes");
  // SIGTERM to the gateway alone: it lets [[jobs]] commands finish within its grace, then kills them.
  expect(unit.get("KillMode")).toBe("mixed");
  expect(Number(unit.get("TimeoutStopSec"))).toBeGreaterThanOrEqual(30);
  expect(unit.get("Restart")).toBe("on-failure");
  // SIGHUP reads the config again; it never stops the gateway.
  expect(unit.get("ExecReload")).toBe("/bin/kill -HUP $MAINPID");
  const security = Bun.spawnSync(["systemd-analyze", "security", "--offline=true", unitForThisBuild()]);
  const level = /Overall exposure level for modelgate\.service: ([\d.]+)/.exec(security.stdout.toString() + security.stderr.toString());
  expect(level).not.toBeNull();
  // systemd's scale: below 4 is "OK"; an unhardened service scores 9.6.
  expect(Number(level![1])).toBeLessThan(4);
});
