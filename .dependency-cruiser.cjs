/**
 * The import rules `make check` enforces over src/ (docs/architecture.md, "Layers"), from the
 * bottom up: shared basics (errors, log, version and the like) → storage and config (db/,
 * config/) → the domain (auth/, credits/, ratelimit/, spendauth/, webhooks/; translate/ on its
 * own) → router/ → the app and its surfaces (app.ts, dashboard/, metrics/) → the entry
 * (cli/, serve.ts, main.ts). An import breaking a rule, or a cycle, fails the check.
 *
 * Type-only imports are read (tsPreCompilationDeps): a type couples two modules as much as a
 * value does, so the layer rules and the cycle rule count them. Two modules that need each
 * other's types share a small types module instead (router/http1-types.ts,
 * webhooks/triage/alert.ts).
 *
 * Imports that still point up are listed by name in each rule's pathNot, each with its reason;
 * docs/architecture.md lists them too. A new one fails the check until it is fixed or listed.
 */
const DOMAIN = "^src/(auth|credits|ratelimit|spendauth|webhooks)/";
const ENTRY = ["^src/cli/", "^src/main[.]ts$", "^src/serve[.]ts$"];
const SURFACES = ["^src/dashboard/", "^src/metrics/", "^src/app[.]ts$", "^src/api[.]ts$"];

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "No module may reach itself through its imports, type-only ones included.",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "storage-and-config-stay-low",
      severity: "error",
      comment: "db/ and config/ serve everything above them and import none of it.",
      from: { path: "^src/(db|config)/" },
      to: {
        path: [DOMAIN, "^src/router/", "^src/translate/", ...SURFACES, ...ENTRY],
        pathNot: [
          // The webhooks file ([webhooks] config = FILE) is read, and the webhook section checked, by webhooks/config.ts.
          "^src/webhooks/config[.]ts$",
        ],
      },
    },
    {
      name: "domain-below-surfaces-and-entry",
      severity: "error",
      comment: "auth/, credits/, ratelimit/, spendauth/ and webhooks/ import neither the app's surfaces nor the entry.",
      // spendauth/cli.ts is SpendAuth's commands: it belongs to the entry, beside cli/.
      from: { path: DOMAIN, pathNot: "^src/spendauth/cli[.]ts$" },
      to: {
        path: [...SURFACES, ...ENTRY],
        pathNot: [
          // The outbox's depth is a /metrics gauge: webhooks/index.ts names the gauge's type.
          "^src/metrics/gateway[.]ts$",
        ],
      },
    },
    {
      name: "router-below-surfaces-and-entry",
      severity: "error",
      comment: "router/ imports neither the app's surfaces (dashboard, metrics, app.ts) nor the entry.",
      from: { path: "^src/router/" },
      to: { path: [...SURFACES, ...ENTRY] },
    },
    {
      name: "entry-imported-only-by-entry",
      severity: "error",
      comment: "cli/ and serve.ts are the top: only main.ts and cli/ import them.",
      // spendauth/cli.ts is SpendAuth's commands, part of the entry: it registers in cli/registry.ts.
      from: { pathNot: ["^src/main[.]ts$", "^src/cli/", "^src/spendauth/cli[.]ts$"] },
      to: { path: ENTRY },
    },
    {
      name: "translate-stands-alone",
      severity: "error",
      comment: "translate/ converts between wire formats over plain values: of src/ it imports only the error shapes.",
      from: { path: "^src/translate/" },
      to: { path: "^src/", pathNot: ["^src/translate/", "^src/errors[.]ts$"] },
    },
    {
      name: "src-not-to-tests",
      severity: "error",
      comment: "What ships never imports the tests or the benchmarks.",
      from: { path: "^src/" },
      to: { path: "^(tests|bench)/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
  },
};
