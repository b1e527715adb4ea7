/** Every /v1 model endpoint's adapter, in the order the docs list them. */
import { chatAdapter } from "./chat";
import { completionsAdapter } from "./completions";
import { embeddingsAdapter, rerankAdapter } from "./embeddings";
import { speechAdapter, transcriptionsAdapter, translationsAdapter } from "./audio";
import { countTokensAdapter, messagesAdapter } from "./messages";
import type { EndpointAdapter } from "./types";

export const ADAPTERS: readonly EndpointAdapter[] = [
  chatAdapter,
  completionsAdapter,
  embeddingsAdapter,
  rerankAdapter,
  transcriptionsAdapter,
  translationsAdapter,
  speechAdapter,
  messagesAdapter,
  countTokensAdapter,
];

export type { EndpointAdapter } from "./types";
