/**
 * The documentation against the repository: every relative link in README.md and docs/*.md
 * reaches a file (and, with a #fragment, a heading of it), and every config key the docs name is
 * a key of the config schema (src/config/schema.ts, with src/config/webhooks-schema.ts under it).
 *
 * What counts as "a config key named" (outside fenced blocks unless said):
 * - every key of a ```toml block, at its full path from the block's tables (`[server]` then
 *   `listen` is `server.listen`; `[[models]]` then `price = { prompt = 1 }` is
 *   `models.price.prompt`). A block whose first line is the comment `# webhooks.toml` is that
 *   file, whose keys sit under `webhooks`;
 * - an inline code span that is a dotted path starting with a top-level section, optionally
 *   with a value: `server.public_url`, `spend_auth.units_per_credit = "0"`;
 * - an inline code span that is a table header of a top-level section, optionally followed by
 *   one key and a value: `[auth.github]`, `[[jobs]]`, `[limits] spend_auth`, `[webhooks] enabled = true`;
 * - the first column of a Markdown table whose first header cell names a table in a code span,
 *   such as "Key (`[webhooks]`)": each first cell's code span is a key of that table.
 * Code spans naming a file (`log.ts`, `webhooks.toml`) are not keys.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { ConfigSchema } from "../../src/config/schema";

const ROOT = resolve(import.meta.dir, "../..");
const DOCS = [
  join(ROOT, "README.md"),
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => join(ROOT, "docs", f)),
];
const SECTIONS = Object.keys(ConfigSchema.properties);
const FILE_NAME = /\.(ts|js|mjs|md|toml|css|sql|db|sh|json|png|yaml)$/;

interface Doc {
  file: string;
  text: string;
  /** The text with fenced blocks blanked out (line numbers kept). */
  prose: string;
}

const docs: Doc[] = DOCS.map((file) => {
  const text = readFileSync(file, "utf8");
  return { file, text, prose: withoutFences(text) };
});

function withoutFences(text: string): string {
  let fenced = false;
  return text
    .split("\n")
    .map((line) => {
      if (line.startsWith("```")) {
        fenced = !fenced;
        return "";
      }
      return fenced ? "" : line;
    })
    .join("\n");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
    .trim()
    .replace(/\s/g, "-");
}

/** Every anchor of a Markdown file, numbered as GitHub numbers repeated headings. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const line of withoutFences(readFileSync(file, "utf8")).split("\n")) {
    const heading = /^#{1,6}\s+(.*?)\s*#*$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1]);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

/** `[text](target)` and `![alt](target)` outside code, with the line they are on. */
function links(doc: Doc): Array<{ target: string; line: number }> {
  const found: Array<{ target: string; line: number }> = [];
  doc.prose.split("\n").forEach((line, i) => {
    const bare = line.replace(/`[^`]*`/g, "");
    for (const m of bare.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) found.push({ target: m[1], line: i + 1 });
  });
  return found;
}

/** Why a link is broken, or null when it reaches its file and heading. */
function brokenLink(from: string, target: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null; // http:, https:, mailto:
  const [path, fragment] = target.split("#", 2);
  const file = path === "" ? from : resolve(dirname(from), decodeURIComponent(path));
  if (!existsSync(file)) return `no file ${relative(ROOT, file)}`;
  if (fragment === undefined || fragment === "") return null;
  if (statSync(file).isDirectory() || !file.endsWith(".md")) return `#${fragment} on a file that is not Markdown`;
  return anchors(file).has(fragment) ? null : `no heading #${fragment} in ${relative(ROOT, file)}`;
}

/** What the key lookup reads of a TypeBox schema. */
interface SchemaNode {
  type?: string;
  items?: SchemaNode;
  properties?: Record<string, SchemaNode>;
}

/** The schema of the key at `path` (arrays of tables step into their items), or null. */
function schemaAt(path: string[]): SchemaNode | null {
  let schema = ConfigSchema as SchemaNode;
  for (const key of path) {
    if (schema.type === "array" && schema.items) schema = schema.items;
    if (schema.type !== "object" || !schema.properties || !Object.hasOwn(schema.properties, key)) return null;
    schema = schema.properties[key];
  }
  return schema;
}

/** Every key path a TOML document sets, tables and arrays of tables walked into. */
function tomlKeys(value: unknown, path: string[], into: string[][]): void {
  if (Array.isArray(value)) {
    for (const item of value) if (item !== null && typeof item === "object" && !Array.isArray(item)) tomlKeys(item, path, into);
    return;
  }
  if (value === null || typeof value !== "object" || value instanceof Date) return;
  for (const [key, inner] of Object.entries(value)) {
    into.push([...path, key]);
    tomlKeys(inner, [...path, key], into);
  }
}

/** Every config key a document names (see the header for the convention), with where. */
function namedKeys(doc: Pick<Doc, "text" | "prose">): Array<{ key: string[]; where: string }> {
  const named: Array<{ key: string[]; where: string }> = [];
  for (const block of doc.text.matchAll(/^```toml\n([\s\S]*?)^```/gm)) {
    const root = /^#\s*webhooks\.toml\b/.test(block[1]) ? ["webhooks"] : [];
    const keys: string[][] = [];
    tomlKeys(parseToml(block[1]), root, keys);
    for (const key of keys) named.push({ key, where: `toml block: ${block[1].split("\n")[0]}` });
  }
  const sections = SECTIONS.join("|");
  const dotted = new RegExp(`^(?:${sections})(?:\\.[a-z_]+)+(?: = .+)?$`);
  const table = new RegExp(`^\\[\\[?((?:${sections})(?:\\.[a-z_]+)*)\\]\\]?(?: ([a-z_]+))?(?: = .+)?$`);
  let tableKeysOf: string[] | null = null;
  for (const line of doc.prose.split("\n")) {
    if (!line.startsWith("|")) tableKeysOf = null;
    else if (tableKeysOf === null) {
      const header = /^\|[^|`]*`\[\[?([a-z_.]+)\]\]?`[^|]*\|/.exec(line);
      tableKeysOf = header ? header[1].split(".") : [];
    } else if (tableKeysOf.length > 0) {
      const cell = /^\|\s*`([a-z_]+)`\s*\|/.exec(line);
      if (cell) named.push({ key: [...tableKeysOf, cell[1]], where: line.slice(0, 60) });
    }
    for (const span of line.matchAll(/`([^`]+)`/g)) {
      const code = span[1];
      if (FILE_NAME.test(code)) continue;
      if (dotted.test(code)) named.push({ key: code.split(" ")[0].split("."), where: `\`${code}\`` });
      const header = table.exec(code);
      if (header) named.push({ key: [...header[1].split("."), ...(header[2] ? [header[2]] : [])], where: `\`${code}\`` });
    }
  }
  return named;
}

describe("docs", () => {
  test("every relative link in README.md and docs/*.md reaches its file and heading", () => {
    const broken: string[] = [];
    for (const doc of docs) {
      for (const { target, line } of links(doc)) {
        const why = brokenLink(doc.file, target);
        if (why) broken.push(`${relative(ROOT, doc.file)}:${line}: (${target}) ${why}`);
      }
    }
    expect(broken).toEqual([]);
  });

  test("every config key the docs name is in the config schema", () => {
    const unknown: string[] = [];
    let count = 0;
    for (const doc of docs) {
      for (const { key, where } of namedKeys(doc)) {
        count++;
        if (schemaAt(key) === null) unknown.push(`${relative(ROOT, doc.file)}: ${key.join(".")} (${where})`);
      }
    }
    expect(unknown).toEqual([]);
    // The convention finds keys at all: a change that matched nothing would pass vacuously.
    expect(count).toBeGreaterThan(150);
  });

  test("the checks themselves catch a broken link, a missing heading and a made-up key", () => {
    const readme = join(ROOT, "README.md");
    expect(brokenLink(readme, "docs/nowhere.md")).toBe("no file docs/nowhere.md");
    expect(brokenLink(readme, "docs/configuration.md#no-such-heading")).toContain("no heading");
    expect(brokenLink(readme, "docs/configuration.md#bounds")).toBeNull();
    expect(slug("Configuration: `[auth]`")).toBe("configuration-auth");
    const made = { text: '```toml\n[server]\nlisten = ":1"\nlisen = ":2"\n```\n', prose: "`routing.max_atempts` and `[limits] anonymus`" };
    const keys = namedKeys(made).map((k) => k.key.join("."));
    expect(keys).toEqual(["server", "server.listen", "server.lisen", "routing.max_atempts", "limits.anonymus"]);
    expect(keys.filter((k) => schemaAt(k.split(".")) === null)).toEqual(["server.lisen", "routing.max_atempts", "limits.anonymus"]);
  });
});
