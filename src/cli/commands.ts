// Registers the feature commands with the CLI table (each module calls registerCommand).
export {};
