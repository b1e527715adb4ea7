/** What the gateway keeps of the requests it served: the request log and stored responses. */
import { index, pgTable, text } from "drizzle-orm/pg-core";
import { int, serialId } from "./columns";

export const requestLog = pgTable(
  "request_log",
  {
    id: serialId("id"),
    requestId: text("request_id").notNull(),
    createdAt: int("created_at").notNull(),
    identity: text("identity").notNull(),
    userId: int("user_id"),
    keyId: text("key_id"),
    model: text("model").notNull(),
    endpoint: text("endpoint").notNull().default("chat"),
    upstream: text("upstream"),
    status: int("status").notNull(),
    promptTokens: int("prompt_tokens").notNull().default(0),
    completionTokens: int("completion_tokens").notNull().default(0),
    costMicro: int("cost_micro").notNull().default(0),
    latencyMs: int("latency_ms").notNull().default(0),
  },
  (t) => [index("request_log_user_time").on(t.userId, t.createdAt), index("request_log_time").on(t.createdAt)],
);

export const storedResponses = pgTable(
  "stored_responses",
  {
    id: text("id").primaryKey(),
    owner: text("owner").notNull(),
    createdAt: int("created_at").notNull(),
    items: text("items").notNull(),
    response: text("response").notNull(),
  },
  (t) => [index("stored_responses_time").on(t.createdAt)],
);
