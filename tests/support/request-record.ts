/** A finished request as the request log takes it: fixed, plausible values, `fields` over them. */
import type { RequestRecord } from "../../src/requests/record";

export function requestRecord(fields: Partial<RequestRecord> = {}): RequestRecord {
  return {
    requestId: "req_1",
    createdAt: 1_000,
    identity: "anonymous",
    userId: null,
    keyId: null,
    model: "m",
    endpoint: "chat",
    upstream: "u",
    status: 200,
    promptTokens: 3,
    completionTokens: 4,
    costMicro: 7,
    latencyMs: 1.6,
    upstreamMs: 1,
    ...fields,
  };
}
