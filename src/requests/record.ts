/**
 * One finished /v1 model request as the gateway records it: who asked (identity kind and ids,
 * never a credential), what for, which upstream answered, and what it cost. The app hands each
 * to `onRequestDone`; the request sink batches them to the log lines, the metrics and the
 * request log.
 */
import type { IdentityKind } from "../identity-kind";
import type { EndpointName } from "../config/schema";

export interface RequestRecord {
  requestId: string;
  createdAt: number;
  identity: IdentityKind;
  userId: number | null;
  keyId: string | null;
  model: string;
  /** The endpoint called ("" for a request refused before its endpoint was known). */
  endpoint: EndpointName | "";
  upstream: string | null;
  status: number;
  promptTokens: number;
  completionTokens: number;
  costMicro: number;
  latencyMs: number;
  upstreamMs: number;
}
