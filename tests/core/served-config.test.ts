/**
 * The config a reloaded generation serves (src/reload.ts) and what its registry takes over from
 * the one before (src/router/registry.ts), in process.
 */
import { describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load";
import { servedConfig } from "../../src/reload";
import { ModelRegistry } from "../../src/router/registry";

const BOUND = { hostname: "127.0.0.1", port: 41234 };

function loaded(raw: Record<string, unknown>): ReturnType<typeof buildConfig> {
  return buildConfig(raw, { env: {} });
}

describe("servedConfig", () => {
  test("restart-only keys keep their running values and are named; the others take the file's", () => {
    const running = servedConfig(
      loaded({ server: { listen: "127.0.0.1:0" }, log: { level: "info" }, limits: { api_key: { per_minute: 5 } } }),
      BOUND,
      null,
    ).config;
    const next = loaded({
      server: { listen: "127.0.0.1:9999", data_dir: "./elsewhere" },
      log: { level: "debug" },
      limits: { api_key: { per_minute: 7 } },
      webhooks: { bind_address: "127.0.0.1:1" },
    });
    const { config, waiting } = servedConfig(next, BOUND, running);
    expect(waiting).toEqual(["server.listen", "server.data_dir", "log", "webhooks.bind_address"]);
    expect(config.server.listen).toBe("127.0.0.1:0");
    expect(config.server.data_dir).toBe(running.server.data_dir);
    expect(config.log.level).toBe("info");
    expect(config.webhooks.bind_address).toBe(running.webhooks.bind_address);
    expect(config.limits.api_key.per_minute).toBe(7);
    expect(next.config.server.listen).toBe("127.0.0.1:9999"); // the loaded config is left as read
  });

  test("an unwritten public_url follows the address the server is bound to; a written one is kept", () => {
    expect(servedConfig(loaded({ server: { listen: "0.0.0.0:0" } }), { hostname: "0.0.0.0", port: 5555 }, null).config.server.public_url).toBe(
      "http://localhost:5555",
    );
    expect(servedConfig(loaded({ server: { listen: "0.0.0.0:0", public_url: "https://gw.example.com" } }), BOUND, null).config.server.public_url).toBe(
      "https://gw.example.com",
    );
  });
});

describe("a registry replacing another", () => {
  const upstreams = [
    { name: "a", base_url: "http://127.0.0.1:1/v1" },
    { name: "b", base_url: "http://127.0.0.1:2/v1" },
  ];
  const models = [{ id: "m", targets: [{ upstream: "a" }, { upstream: "b" }] }];

  test("an unchanged upstream keeps its state, and a target on it its circuit; a changed one starts fresh", () => {
    const before = new ModelRegistry(loaded({ upstreams, models }).config);
    before.upstreams.get("a")!.failures = 3;
    before.resolve("m")!.targets[0].circuit.opened = 2;
    const changed = [upstreams[0], { ...upstreams[1], connect_timeout_ms: 100 }];
    const after = new ModelRegistry(loaded({ upstreams: changed, models }).config, { previous: before });
    expect(after.upstreams.get("a")).toBe(before.upstreams.get("a")!);
    expect(after.upstreams.get("b")).not.toBe(before.upstreams.get("b")!);
    expect(after.resolve("m")!.targets[0].circuit.opened).toBe(2);
    expect(after.resolve("m")!.targets[1].circuit).not.toBe(before.resolve("m")!.targets[1].circuit);
  });
});
