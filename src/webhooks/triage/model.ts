/**
 * How a triage job reaches its model: a ModelCaller, which the server makes from its own router
 * (src/router/in-process.ts) so the call runs through the pipeline a /v1/chat/completions request
 * does, without HTTP. The webhooks layer sees only this type.
 */
export interface ModelCall {
  model: string;
  prompt: string;
  maxTokens: number;
  /** The user the call is metered, limited and logged as; null for the built-in service identity (free models only). */
  asUser: string | null;
  timeoutMs: number;
}

/** `retry`: the model may answer later (down, slow, rate limited); a refusal (no such model, no credits) will not change. */
export type ModelAnswer = { ok: true; text: string } | { ok: false; error: string; retry: boolean };

export type ModelCaller = (call: ModelCall) => Promise<ModelAnswer>;

/** Reasoning models' thinking, which is no part of a summary. */
export function withoutThinking(text: string): string {
  return text.replace(/<think>[\s\S]*?<\/think>/g, "").trim();
}
