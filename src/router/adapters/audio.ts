/**
 * The audio endpoints. POST /v1/audio/transcriptions and /v1/audio/translations take a multipart
 * upload, streamed through to the target as it arrives (../upload.ts reads its `model` field on
 * the way); the answer (JSON, or text for the text/srt/vtt formats) is relayed whole. POST
 * /v1/audio/speech takes JSON and streams the audio back as it comes. None reports tokens: each
 * successful call is charged price.request.
 */
import { Type as t } from "@sinclair/typebox";
import { callCostMicro, type Usage } from "../../credits/cost";
import { reserveFixed, type ReserveInput } from "../../credits/reservation";
import { jsonChecker } from "./check";
import type { CallBody, EndpointAdapter } from "./types";

export const SpeechRequest = t.Object(
  {
    model: t.String({ minLength: 1, description: "Model route identifier (GET /v1/models)" }),
    input: t.String({ minLength: 1, description: "The text to speak" }),
    voice: t.Union([t.String({ minLength: 1 }), t.Object({}, { additionalProperties: true })]),
  },
  { additionalProperties: true },
);

const ONE_CALL: Usage = { prompt_tokens: 0, completion_tokens: 0, calls: 1 };

const perCall = {
  usage: (): null => null,
  estimate: (): Usage => ONE_CALL,
  reserve: (input: ReserveInput) => reserveFixed(callCostMicro(input.price), input.availableMicro),
};

/** An upload's fields are the upstream's to check; the gateway reads only `model` (../upload.ts). */
function uploadChecked(_body: unknown): asserts _body is CallBody {}

function uploadAdapter(name: "transcriptions" | "translations"): EndpointAdapter {
  return { name, paths: [`/v1/audio/${name}`], upstreamPath: `audio/${name}`, input: "multipart", answer: "whole", check: uploadChecked, ...perCall };
}

export const transcriptionsAdapter = uploadAdapter("transcriptions");
export const translationsAdapter = uploadAdapter("translations");

export const speechAdapter: EndpointAdapter = {
  name: "speech",
  paths: ["/v1/audio/speech"],
  upstreamPath: "audio/speech",
  input: "json",
  answer: "bytes",
  check: jsonChecker(SpeechRequest),
  ...perCall,
};
