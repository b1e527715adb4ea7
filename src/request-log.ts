/**
 * The request log: one row per finished chat request in `request_log`, written behind in batches
 * so that no request waits on the database.
 */
import type { Db } from "./db/client";
import { requestLog } from "./db/schema";
import { createWriteBehind, type WriteBehind } from "./db/write-behind";
import type { RequestRecord } from "./deps";

export function createRequestLog(db: Db): WriteBehind<RequestRecord> {
  return createWriteBehind<RequestRecord>(
    (rows) => {
      db.transaction((tx) => {
        for (const r of rows) {
          tx.insert(requestLog).values({
            requestId: r.requestId,
            createdAt: r.createdAt,
            identity: r.identity,
            userId: r.userId,
            keyId: r.keyId,
            model: r.model,
            upstream: r.upstream,
            status: r.status,
            promptTokens: r.promptTokens,
            completionTokens: r.completionTokens,
            costMicro: r.costMicro,
            latencyMs: Math.round(r.latencyMs),
          }).run();
        }
      });
    },
    { label: "request log" },
  );
}
