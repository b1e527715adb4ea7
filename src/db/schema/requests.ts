/** What the gateway keeps of the requests it served: the request log and stored responses. */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** One row per /v1/chat/completions request, written behind in batches. */
export const requestLog = sqliteTable(
  "request_log",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    requestId: text("request_id").notNull(),
    createdAt: integer("created_at").notNull(),
    identity: text("identity").notNull(),
    userId: integer("user_id"),
    keyId: text("key_id"),
    model: text("model").notNull(),
    /** The endpoint called (`chat`, `embeddings`, … as the metrics label names it; "" when refused before it was known). */
    endpoint: text("endpoint").notNull().default("chat"),
    upstream: text("upstream"),
    status: integer("status").notNull(),
    promptTokens: integer("prompt_tokens").notNull().default(0),
    completionTokens: integer("completion_tokens").notNull().default(0),
    costMicro: integer("cost_micro").notNull().default(0),
    latencyMs: integer("latency_ms").notNull().default(0),
  },
  (t) => [index("request_log_user_time").on(t.userId, t.createdAt), index("request_log_time").on(t.createdAt)],
);

/**
 * /v1/responses answers kept for previous_response_id and GET /v1/responses/{id} (src/router/response-store.ts):
 * whose they are (`owner`: "user:ID" or "spend:COMMITMENT"), the conversation as Responses input
 * items (what came before, this request's input, the output), and the Response object as sent.
 * Pruned after server.response_store_days.
 */
export const storedResponses = sqliteTable(
  "stored_responses",
  {
    id: text("id").primaryKey(),
    owner: text("owner").notNull(),
    createdAt: integer("created_at").notNull(),
    items: text("items").notNull(),
    response: text("response").notNull(),
  },
  (t) => [index("stored_responses_time").on(t.createdAt)],
);
