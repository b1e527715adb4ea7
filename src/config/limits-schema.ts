/**
 * The `[limits]` section of the config schema: request and token rates per API key, per user, per
 * session, for SpendAuth and for anonymous callers, and how many keys one user may hold. Every
 * default is named here (and in docs/configuration.md).
 */
import { Type as T } from "@sinclair/typebox";

/** `[limits] keys_per_user` when the config does not say: unrevoked keys one user may hold. */
export const DEFAULT_KEYS_PER_USER = 100;

/** The most requests a limit may name (as `key create --per-minute`): the x-ratelimit headers stay plain integers. */
const MAX_LIMIT = 1_000_000_000;

/** One `[limits]` entry. A key left out keeps its default; `per_day = 0` means no daily window. */
function limitEntry(defaults: { per_minute: number; per_day?: number }) {
  return T.Object(
    {
      per_minute: T.Integer({ minimum: 1, maximum: MAX_LIMIT }),
      per_day: T.Optional(T.Integer({ minimum: 0, maximum: MAX_LIMIT })),
    },
    { additionalProperties: false, default: defaults },
  );
}

const tokensPerMinute = T.Optional(T.Integer({ minimum: 1, maximum: MAX_LIMIT }));

/** `[limits] api_key`: the default for every key without its own; tokens per minute none unless set. */
const ApiKeyLimit = T.Object(
  {
    per_minute: T.Integer({ minimum: 1, maximum: MAX_LIMIT }),
    per_day: T.Optional(T.Integer({ minimum: 0, maximum: MAX_LIMIT })),
    tokens_per_minute: tokensPerMinute,
  },
  { additionalProperties: false, default: { per_minute: 60 } },
);

/** `[limits] user`: a ceiling across all of one user's API keys together (each part optional). */
const UserLimit = T.Optional(
  T.Object({ per_minute: T.Optional(T.Integer({ minimum: 1, maximum: MAX_LIMIT })), tokens_per_minute: tokensPerMinute }, { additionalProperties: false }),
);

export const Limits = T.Object(
  {
    api_key: ApiKeyLimit,
    /** A ceiling across all of one user's API keys together; none by default. */
    user: UserLimit,
    /** Active (unrevoked) API keys one user may hold. */
    keys_per_user: T.Integer({ default: DEFAULT_KEYS_PER_USER, minimum: 1, maximum: 100_000 }),
    session: limitEntry({ per_minute: 30 }),
    spend_auth: limitEntry({ per_minute: 120 }),
    anonymous: limitEntry({ per_minute: 10, per_day: 5 }),
  },
  { additionalProperties: false, default: {} },
);
