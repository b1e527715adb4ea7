/**
 * The config's errors. Each message names the key path and the reason, as the CLI prints it
 * (`models[2].targets[0].upstream: no upstream named "olama"`).
 */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** An `env:VAR` whose variable is unset or empty, under the key at `path`. */
export class UnsetVariableError extends ConfigError {
  constructor(
    readonly path: string,
    variable: string,
    state: "unset" | "empty",
  ) {
    super(`${path}: environment variable ${variable} is ${state === "unset" ? "not set" : "set but empty"}`);
  }
}
