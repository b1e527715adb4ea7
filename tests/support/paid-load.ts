/**
 * What the kill -9 tests send against the compiled binary and read back from its data directory
 * afterwards: a chat request paid by API key, one paid by a SpendAuth header, and the ledger's
 * totals. A request cut off by the kill is a result (not whole, no status), never a thrown error.
 */
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { RunningGateway } from "./binary";

/** True when the answer came in full (a JSON body with its usage, a stream through [DONE]); throws on any status but 200. */
export async function paidChat(gw: RunningGateway, options: { key: string; body: Record<string, unknown>; stream: boolean }): Promise<boolean> {
  let response: Response;
  let text: string;
  try {
    response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${options.key}`, "content-type": "application/json" },
      body: JSON.stringify({ ...options.body, stream: options.stream }),
    });
    text = await response.text();
  } catch {
    return false; // the connection died with the process
  }
  if (response.status !== 200) throw new Error(`status ${response.status}: ${text}`);
  if (options.stream) return text.includes("data: [DONE]");
  try {
    return typeof JSON.parse(text).usage === "object";
  } catch {
    return false; // cut off mid-body
  }
}

/** The answer to a request paid with the SpendAuth header `value`; null when the connection died before the whole answer arrived. */
export async function payWithHeader(
  gw: RunningGateway,
  options: { value: string; body: Record<string, unknown> },
): Promise<{ status: number; code: string | null } | null> {
  try {
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment-signature": options.value },
      body: JSON.stringify(options.body),
    });
    const body = (await response.json()) as { error?: { code: string } };
    return { status: response.status, code: body.error?.code ?? null };
  } catch {
    return null;
  }
}

export interface LedgerTotals {
  /** Everything debited, as a positive number of micro-credits. */
  debited: number;
  /** The one user's balance row. */
  balance: number;
  /** The sum of every ledger entry: grants less debits. */
  sum: number;
}

/** Read with the process gone (after kill -9, or before the next start). */
export function ledgerTotals(dataDir: string): LedgerTotals {
  const db = new Database(join(dataDir, "modelgate.db"));
  try {
    const debited = (db.query("SELECT coalesce(-sum(micro), 0) AS m FROM ledger WHERE kind = 'debit'").get() as { m: number }).m;
    const balance = (db.query("SELECT micro FROM balances").get() as { micro: number }).micro;
    const sum = (db.query("SELECT sum(micro) AS s FROM ledger").get() as { s: number }).s;
    return { debited, balance, sum };
  } finally {
    db.close();
  }
}
