/**
 * `modelgate settlements list [--state pending|authorized|done|dead] [--json]` and
 * `modelgate settlements retry ID`: the settlement queue from the command line, over the same
 * database the server uses.
 */
import { command } from "../cli/registry";
import { idOperand, stringFlag, UsageError } from "../cli/args";
import { formatTable } from "../cli/table";
import { listSettlements, retrySettlement, settlementCounts, SETTLEMENT_STATES, type SettlementState } from "./settlements";

const USAGE = "usage: modelgate settlements list [--state pending|authorized|done|dead] [--json] | settlements retry ID";

export const settlementsCommand = command(
  async (ctx) => {
    const sub = ctx.args.positionals[1];
    // Usage errors come before the database is opened (or created).
    if (sub !== "list" && sub !== "retry") throw new UsageError(USAGE);
    const retryId = sub === "retry" ? idOperand(ctx.args.positionals[2], "usage: modelgate settlements retry ID") : 0;
    const state = stringFlag(ctx.args, "state");
    if (state !== undefined && !SETTLEMENT_STATES.includes(state as SettlementState))
      throw new UsageError(`--state must be one of ${SETTLEMENT_STATES.join(", ")}`);
    const opened = await ctx.openDb();
    try {
      if (sub === "list") {
        const rows = await listSettlements(opened.db, { state: state as SettlementState | undefined, limit: 1000 });
        if (ctx.args.flags.has("json")) {
          ctx.print(JSON.stringify(rows, null, 2));
          return 0;
        }
        const counts = await settlementCounts(opened.db);
        ctx.print(SETTLEMENT_STATES.map((s) => `${s} ${counts[s]}`).join("  "));
        const table = [["ID", "STATE", "COMMITMENT", "NONCE", "AMOUNT", "ATTEMPTS", "TX / LAST ERROR"]];
        for (const row of rows) {
          const note = row.state === "done" ? (row.txHash ?? "") : (row.lastError ?? "");
          table.push([String(row.id), row.state, `${row.commitment.slice(0, 10)}…`, row.nonce, row.amount, String(row.attempts), note]);
        }
        // Aligned, and an error an RPC node wrote cannot move the cursor or forge a row.
        for (const line of formatTable(table)) ctx.print(line);
        return 0;
      }
      if (!(await retrySettlement(opened.db, retryId, Date.now()))) {
        ctx.print(`settlement ${retryId} is not dead (or does not exist, or its client's newer authorization for the nonce is being served); nothing to retry`);
        return 1;
      }
      ctx.print(`settlement ${retryId} queued again`);
      return 0;
    } finally {
      await opened.close();
    }
  },
  {
    list: { flags: ["state", "json"], words: 2 },
    retry: { flags: [], words: 3 },
  },
);
