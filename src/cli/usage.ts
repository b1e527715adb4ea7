/**
 * `modelgate usage export [--user EMAIL] [--key KEY_ID|KEY] [--from DATE] [--to DATE] [--format csv|json]`:
 * the request log's rows to stdout (../credits/usage-export.ts), written a chunk at a time and
 * waiting for the pipe to take each, so the export's size never decides the memory it needs.
 * --from is inclusive, --to exclusive; a bare day as --to means up to the end of that day (UTC).
 */
import { command } from "./registry";
import { stringFlag, UsageError } from "./args";
import { requireUser } from "./users";
import { resolveKeyId } from "../auth/key-updates";
import { usageChunks, type UsageFilter } from "../credits/usage-export";

const USAGE = "usage: modelgate usage export [--user EMAIL] [--key KEY_ID|KEY] [--from DATE] [--to DATE] [--format csv|json]";
const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;
const ISO_RE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?)?$/;

/** A day (UTC) or an ISO date-time; a bare day as the end of a range is its end. */
function parseBound(flag: "from" | "to", text: string): number {
  const trimmed = text.trim();
  const written = ISO_RE.test(trimmed) && trimmed.includes("T") && !/(Z|[+-]\d{2}:\d{2})$/.test(trimmed) ? `${trimmed}Z` : trimmed;
  const ms = ISO_RE.test(trimmed) ? Date.parse(written) : NaN;
  if (Number.isNaN(ms)) throw new UsageError(`--${flag}: "${text.slice(0, 40)}" is not a date like 2026-11-01 or 2026-11-01T12:00Z`);
  return flag === "to" && DAY_RE.test(trimmed) ? ms + 86_400_000 : ms;
}

export const usageCommand = command(
  async (ctx) => {
    if (ctx.args.positionals[1] !== "export") throw new UsageError(USAGE);
    const format = stringFlag(ctx.args, "format") ?? "csv";
    if (format !== "csv" && format !== "json") throw new UsageError(`--format: csv or json`);
    const from = stringFlag(ctx.args, "from");
    const to = stringFlag(ctx.args, "to");
    const filter: UsageFilter = { from: from === undefined ? undefined : parseBound("from", from), to: to === undefined ? undefined : parseBound("to", to) };
    const email = stringFlag(ctx.args, "user");
    const key = stringFlag(ctx.args, "key");
    const opened = await ctx.openDb();
    try {
      if (email !== undefined) filter.userId = (await requireUser(opened.db, email, ctx)).id;
      if (key !== undefined) {
        const id = await resolveKeyId(opened.db, key);
        if (id === null)
          throw new UsageError(
            `--key: no API key with ${key.startsWith("sk-mg-") ? "that key (checked by its hash)" : `the id ${key}`} (see: modelgate key list)`,
          );
        filter.keyId = id;
      }
      const out = Bun.stdout.writer();
      for await (const chunk of usageChunks(opened.db, filter, format)) {
        out.write(chunk);
        await out.flush();
      }
      await out.flush();
    } finally {
      await opened.close();
    }
    return 0;
  },
  {
    export: { flags: ["user", "key", "from", "to", "format"], words: 2 },
  },
);
