/**
 * The responses /v1/responses keeps (`store`, true unless the request says false): for
 * `previous_response_id` and GET /v1/responses/{id}. Each is owned by the identity that made it,
 * and only that owner finds it: a key's or a session's user (`user:ID`, so a user's keys and
 * dashboard session share their conversations), or a SpendAuth commitment (`spend:ADDRESS`).
 * Anonymous callers own nothing, so nothing of theirs is kept (responseOwner is null).
 *
 * A row holds the conversation as Responses input items (what came before, this request's input,
 * then the output), so a later request continues it whichever target serves it, and the Response
 * object as the client got it. One whose JSON passes `maxBytes` is not kept. Rows older than
 * server.response_store_days are pruned as the request log is: soon after start, then hourly,
 * a chunk at a time.
 */
import { brieflyLocked, type Db } from "../db/client";
import { pruneOlderThan, startPruning } from "../db/prune";
import type { Identity } from "../auth/types";
import { log } from "../log";

interface StoredResponse {
  items: unknown[];
  response: Record<string, unknown>;
}

export interface ResponseStore {
  /** The response `id` of `owner`, or null (unknown, another owner's, or pruned: the same to the caller). */
  get(id: string, owner: string): StoredResponse | null;
  /** The size of response `id`'s conversation in bytes, whoever owns it (0 for none): what a call continuing it reserves for. */
  bytes(id: string): number;
  /** Keeps a response; false when it is over the size bound, its id is taken, or the database refused it (logged). */
  put(input: { id: string; owner: string; items: unknown[]; response: Record<string, unknown> }): boolean;
}

const PRUNE_CHUNK = 2_000;

/** Who owns what an identity stores; null for an anonymous caller, who keeps nothing. */
export function responseOwner(identity: Identity): string | null {
  if (identity.kind === "spend_auth") return `spend:${identity.subject}`;
  return identity.userId === null ? null : `user:${identity.userId}`;
}

export function createResponseStore(db: Db, options: { maxBytes: number; now: () => number }): ResponseStore {
  const select = db.$client.prepare<{ items: string; response: string }, [string, string]>(
    "SELECT items, response FROM stored_responses WHERE id = ? AND owner = ?",
  );
  const insert = db.$client.prepare<unknown, [string, string, number, string, string]>(
    "INSERT INTO stored_responses (id, owner, created_at, items, response) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
  );
  const size = db.$client.prepare<{ bytes: number }, [string]>("SELECT length(items) AS bytes FROM stored_responses WHERE id = ?");
  const write = brieflyLocked(db.$client, (...row: [string, string, number, string, string]) => insert.run(...row));
  return {
    get(id, owner) {
      const row = select.get(id, owner);
      return row ? { items: JSON.parse(row.items) as unknown[], response: JSON.parse(row.response) as Record<string, unknown> } : null;
    },
    bytes(id) {
      return size.get(id)?.bytes ?? 0;
    },
    put({ id, owner, items, response }) {
      const itemsJson = JSON.stringify(items);
      const responseJson = JSON.stringify(response);
      if (itemsJson.length + responseJson.length > options.maxBytes) {
        log("warn", `responses: ${id} not stored, its conversation is over server.response_store_max_bytes (${options.maxBytes})`, { response_id: id });
        return false;
      }
      try {
        // An id already taken (an upstream's, repeated) keeps its first owner's row.
        return write(id, owner, options.now(), itemsJson, responseJson).changes === 1;
      } catch (error) {
        log("warn", `responses: ${id} not stored, the database refused it`, { response_id: id, error: String((error as Error)?.message ?? error) });
        return false;
      }
    },
  };
}

/** Deletes stored responses created before `before` (ms), a chunk at a time; returns how many. */
export function pruneStoredResponses(db: Db, before: number): Promise<number> {
  return pruneOlderThan(db, "stored_responses", before, PRUNE_CHUNK);
}

/** Prunes soon after start, then hourly (../db/prune.ts); returns the stop. */
export function startResponsePruning(db: Db, options: { retainDays: number; now: () => number; firstPruneMs?: number }): () => void {
  return startPruning({ ...options, prune: (before) => pruneStoredResponses(db, before), label: "responses" });
}
