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
 * a chunk at a time. On SQLite every call answers at once (prepared statements); on Postgres each
 * is a promise, and put's resolves once the row is committed (or refused).
 */
import type { SQL } from "bun";
import { brieflyLocked, type Db } from "../db/client";
import { postgresOf } from "../db/engine";
import { pruneOlderThan, startPruning } from "../db/prune";
import type { Identity } from "../auth/types";
import { log } from "../log";

interface StoredResponse {
  items: unknown[];
  response: Record<string, unknown>;
}

/** A value on SQLite, a promise of it on Postgres. */
type Answer<T> = T | Promise<T>;

interface StoredInput {
  id: string;
  owner: string;
  items: unknown[];
  response: Record<string, unknown>;
}

export interface ResponseStore {
  /** The response `id` of `owner`, or null (unknown, another owner's, or pruned: the same to the caller). */
  get(id: string, owner: string): Answer<StoredResponse | null>;
  /** The size of response `id`'s conversation in bytes, whoever owns it (0 for none): what a call continuing it reserves for. */
  bytes(id: string): Answer<number>;
  /** Keeps a response; false when it is over the size bound, its id is taken, or the database refused it (logged). Never rejects. */
  put(input: StoredInput): Answer<boolean>;
}

const PRUNE_CHUNK = 2_000;

/** Who owns what an identity stores; null for an anonymous caller, who keeps nothing. */
export function responseOwner(identity: Identity): string | null {
  if (identity.kind === "spend_auth") return `spend:${identity.subject}`;
  return identity.userId === null ? null : `user:${identity.userId}`;
}

function parsed(row: { items: string; response: string } | undefined | null): StoredResponse | null {
  return row ? { items: JSON.parse(row.items) as unknown[], response: JSON.parse(row.response) as Record<string, unknown> } : null;
}

/** The JSON of what `put` keeps, or null (logged) when it is over the size bound. */
function keptJson(input: StoredInput, maxBytes: number): { items: string; response: string } | null {
  const items = JSON.stringify(input.items);
  const response = JSON.stringify(input.response);
  if (items.length + response.length <= maxBytes) return { items, response };
  log("warn", `responses: ${input.id} not stored, its conversation is over server.response_store_max_bytes (${maxBytes})`, { response_id: input.id });
  return null;
}

function refused(id: string, error: unknown): false {
  log("warn", `responses: ${id} not stored, the database refused it`, { response_id: id, error: String((error as Error)?.message ?? error) });
  return false;
}

export function createResponseStore(db: Db, options: { maxBytes: number; now: () => number }): ResponseStore {
  const pg = postgresOf(db);
  if (pg) return createPostgresResponseStore(pg, options);
  const select = db.$client.prepare<{ items: string; response: string }, [string, string]>(
    "SELECT items, response FROM stored_responses WHERE id = ? AND owner = ?",
  );
  const insert = db.$client.prepare<unknown, [string, string, number, string, string]>(
    "INSERT INTO stored_responses (id, owner, created_at, items, response) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
  );
  const size = db.$client.prepare<{ bytes: number }, [string]>("SELECT length(items) AS bytes FROM stored_responses WHERE id = ?");
  const write = brieflyLocked(db.$client, (...row: [string, string, number, string, string]) => insert.run(...row));
  return {
    get: (id, owner) => parsed(select.get(id, owner)),
    bytes: (id) => size.get(id)?.bytes ?? 0,
    put(input) {
      const json = keptJson(input, options.maxBytes);
      if (json === null) return false;
      try {
        // An id already taken (an upstream's, repeated) keeps its first owner's row.
        return write(input.id, input.owner, options.now(), json.items, json.response).changes === 1;
      } catch (error) {
        return refused(input.id, error);
      }
    },
  };
}

function createPostgresResponseStore(sql: SQL, options: { maxBytes: number; now: () => number }): ResponseStore {
  return {
    async get(id, owner) {
      const [row] = (await sql`SELECT items, response FROM stored_responses WHERE id = ${id} AND owner = ${owner}`) as Array<{
        items: string;
        response: string;
      }>;
      return parsed(row);
    },
    async bytes(id) {
      const [row] = (await sql`SELECT length(items) AS bytes FROM stored_responses WHERE id = ${id}`) as Array<{ bytes: number }>;
      return Number(row?.bytes ?? 0);
    },
    async put(input) {
      const json = keptJson(input, options.maxBytes);
      if (json === null) return false;
      try {
        const inserted = await sql`INSERT INTO stored_responses (id, owner, created_at, items, response)
          VALUES (${input.id}, ${input.owner}, ${options.now()}, ${json.items}, ${json.response}) ON CONFLICT (id) DO NOTHING`;
        return inserted.count === 1;
      } catch (error) {
        return refused(input.id, error);
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
