/**
 * The config's errors. Each message names the key path and the reason, as the CLI prints it
 * (`models[2].targets[0].upstream: no upstream named "olama"`).
 */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * How a message names a key. A key set in a webhooks file (`[webhooks] config = FILE`) is named as
 * that file's (`/etc/modelgate/webhooks.toml: endpoints[1].job_id`), where the operator looks for it.
 */
export interface KeyNames {
  /** The path as a message names it. */
  say(path: string): string;
  /** The path as written in its own file (`endpoints` for the webhooks file's `[[endpoints]]`). */
  local(path: string): string;
}

/** Every key as written in the main config. */
export const MAIN_CONFIG_KEYS: KeyNames = { say: (path) => path, local: (path) => path };

/** An `env:VAR` reference whose variable is unset or empty, under the key at `path`. */
export interface UnsetVariable {
  path: string;
  variable: string;
  state: "unset" | "empty";
}

/**
 * Every `env:VAR` of the config whose variable is unset or empty, named in one message (the first
 * in full, the rest after it), so a shell missing four variables learns of all four at once.
 */
export class UnsetVariableError extends ConfigError {
  readonly paths: string[];
  constructor(unset: UnsetVariable[]) {
    const [first, ...rest] = unset;
    const more = rest.map((u) => `${u.path} (${u.variable}${u.state === "empty" ? ", empty" : ""})`);
    super(
      `${first.path}: environment variable ${first.variable} is ${first.state === "unset" ? "not set" : "set but empty"}${more.length ? `; also unset: ${more.join(", ")}` : ""}`,
    );
    this.paths = unset.map((u) => u.path);
  }
}

/** `FILE:LINE:COLUMN: invalid TOML: reason`, from a smol-toml error (which carries the place). */
export function invalidToml(file: string, err: unknown): ConfigError {
  const { line, column, message } = err as { line?: unknown; column?: unknown; message?: unknown };
  const at = typeof line === "number" && typeof column === "number" ? `:${line}:${column}` : "";
  const reason = String(message ?? err)
    .split("\n")[0]
    .replace(/^Invalid TOML document: /, "");
  return new ConfigError(`${file}${at}: invalid TOML: ${reason}`);
}
