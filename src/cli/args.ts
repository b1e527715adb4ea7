/**
 * A tiny argv parser: positionals plus `--flag value`, `--flag=value` and bare boolean flags.
 * Which flags are boolean is declared by the command, never guessed, and a boolean flag takes no
 * value. A value that starts with `--` must be written `--flag=--value`. A flag given twice is an
 * error.
 */
export interface Args {
  positionals: string[];
  flags: Map<string, string | true>;
}

export class UsageError extends Error {
  override name = "UsageError";
}

/**
 * `booleans`: the flags that take no value. `known`, when given: every flag any command takes; one
 * outside it, last or before another flag, is kept without a value for the command's check to
 * refuse as unknown, rather than refused here as needing a value.
 */
export function parseArgs(argv: string[], booleans: ReadonlySet<string> = new Set(), known?: ReadonlySet<string>): Args {
  const positionals: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith("--")) {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    // Which of two values was meant is a guess (`--amount 5 --amount 6`); with money, never guess.
    if (flags.has(name)) throw new UsageError(`--${name} is given twice`);
    // `--admin=false` would read as `--admin`: a script passing `--admin=$IS_ADMIN` made admins.
    if (eq !== -1 && booleans.has(name)) throw new UsageError(`--${name} takes no value: give --${name} alone, or leave it out`);
    if (eq !== -1) flags.set(name, arg.slice(eq + 1));
    else if (booleans.has(name)) flags.set(name, true);
    // A flag is never a value: `--name --config x` must not name a key "--config".
    else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) flags.set(name, argv[++i]);
    // Unknown to every command: left for the command's own check, which names it as unknown.
    else if (known && !known.has(name)) flags.set(name, true);
    else throw new UsageError(`--${name} needs a value`);
  }
  return { positionals, flags };
}

export function stringFlag(args: Args, name: string): string | undefined {
  const value = args.flags.get(name);
  return typeof value === "string" ? value : undefined;
}

export function requireFlag(args: Args, name: string): string {
  const value = stringFlag(args, name);
  if (value === undefined) throw new UsageError(`--${name} is required`);
  return value;
}

/**
 * A row id operand (`jobs retry 7`, `settlements retry 7`): digits only, leading zeros allowed
 * (`07` is 7), at least 1. Anything else is refused without echoing it (it may be a pasted secret).
 */
export function idOperand(raw: string | undefined, usage: string): number {
  if (raw === undefined) throw new UsageError(usage);
  const id = /^[0-9]{1,15}$/.test(raw) ? Number(raw) : 0;
  if (id < 1) throw new UsageError(`${usage}: the id is a whole number from 1, as the list shows it`);
  return id;
}
