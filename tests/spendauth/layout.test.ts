/**
 * SpendAuth's place in the source tree: all of it under src/spendauth/, which may use auth/'s
 * types while auth/ never imports it (dependencies run one way), and viem stays out of what
 * `serve` and the CLI load before they know SpendAuth is on (src/serve.ts imports ./spendauth/setup
 * with import(), only then). Read from the sources' import statements.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
const SRC = join(ROOT, "src");

interface Imports {
  /** Loaded when the importing module is (neither `import type` nor `import()`). */
  eager: string[];
  all: string[];
}

function importsOf(file: string): Imports {
  const text = readFileSync(file, "utf8");
  const eager: string[] = [];
  const all: string[] = [];
  for (const match of text.matchAll(/^(import|export)\s+(type\s+)?(?:[^;"']*?\s+from\s+)?["']([^"']+)["']/gm)) {
    const target = resolveSpecifier(file, match[3]!);
    all.push(target);
    if (!match[2]) eager.push(target);
  }
  for (const match of text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) all.push(resolveSpecifier(file, match[1]!));
  return { eager, all };
}

/** A source file's path relative to the repository, or a package's name as written. */
function resolveSpecifier(from: string, specifier: string): string {
  if (!specifier.startsWith(".")) return specifier;
  const base = resolve(dirname(from), specifier);
  for (const candidate of [base, `${base}.ts`, join(base, "index.ts")]) {
    if (existsSync(candidate) && !statSync(candidate).isDirectory()) return relative(ROOT, candidate);
  }
  throw new Error(`${relative(ROOT, from)}: cannot resolve ${specifier}`);
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(join(SRC, dir), { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .map((name) => join("src", dir, name));
}

/** Every module loaded eagerly from `entry`, packages included. */
function eagerClosure(entry: string): Set<string> {
  const seen = new Set<string>();
  const stack = [entry];
  while (stack.length > 0) {
    const next = stack.pop()!;
    if (seen.has(next)) continue;
    seen.add(next);
    if (next.startsWith("src/") && next.endsWith(".ts")) stack.push(...importsOf(join(ROOT, next)).eager);
  }
  return seen;
}

describe("SpendAuth's layout", () => {
  test("auth/ has no SpendAuth file and imports nothing from spendauth/", () => {
    const auth = sourcesUnder("auth");
    expect(auth.filter((file) => file.includes("spendauth"))).toEqual([]);
    const crossing = auth.flatMap((file) =>
      importsOf(join(ROOT, file))
        .all.filter((target) => target.startsWith("src/spendauth/"))
        .map((target) => `${file} -> ${target}`),
    );
    expect(crossing).toEqual([]);
  });

  test("what the binary loads before it knows SpendAuth is on has no viem", () => {
    // The CLI's commands (settlements among them) load at every start; `serve` loads the server
    // (src/serve.ts) when it runs, before it reads whether SpendAuth is on.
    const loaded = [...eagerClosure("src/main.ts"), ...eagerClosure("src/serve.ts")];
    expect(loaded).toContain("src/spendauth/mode.ts");
    expect(loaded).toContain("src/spendauth/settlements.ts");
    expect(loaded.filter((name) => name === "viem" || name.startsWith("viem/"))).toEqual([]);
    expect(eagerClosure("src/spendauth/setup.ts").has("viem")).toBe(true);
  });
});
