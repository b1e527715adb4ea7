/**
 * API keys. Format: `sk-mg-` + 39 base32 characters (24 random bytes) + a 7-character CRC-32 of
 * them, 52 characters in all, so a mistyped or truncated key is refused before any database read.
 * Only the SHA-256 of a key is stored; createApiKey returns the key itself once and never again.
 * Rows are soft-revoked (`revoked_at`), never deleted, for the audit trail.
 *
 * The request path checks keys in ./key-verifier.ts. `last_used_at` is written behind, at most
 * once a minute per key (./key-last-used.ts).
 *
 *   createApiKey(db, { userId, name, expiresAt?, policy? }) -> { id, key, displayPrefix }
 *   listApiKeys(db, { userId? })    -> ApiKeyInfo[] (no secrets)
 *   revokeApiKey(db, keyId, { userId?, now? }) -> "revoked" | "already_revoked" | "not_found"
 *   parseApiKey(key)                -> { hash } | denial (format and checksum only)
 * Every function over the database is async and works on either engine (../db/engine.ts).
 */
import { and, desc, eq, isNull } from "drizzle-orm";
import { mapPerDatabase, type Db } from "../db/client";
import { tablesOf } from "../db/engine";
import { randomToken, sha256Hex } from "./tokens";
import type { Identity } from "./types";
import type { CompiledPolicy, PolicyChange, PolicyColumns } from "./key-policy";

export const KEY_PREFIX = "sk-mg-";
/**
 * Anything that could be a key, valid or not: the prefix and a run of 24 or more letters and digits,
 * in either case (most of a key, all of it retyped, one mistyped as 0 or 8). A name that only
 * starts like one (`sk-mg-staging-box`) is no key.
 */
const KEY_LIKE = /sk-mg-[a-z0-9]{24,}/gi;
const BODY_LENGTH = 39;
const CHECK_LENGTH = 7;
const CHECK_AT = KEY_PREFIX.length + BODY_LENGTH;
const KEY_FORMAT = new RegExp(`^${KEY_PREFIX}[a-z2-7]{${BODY_LENGTH + CHECK_LENGTH}}$`);

export interface KeyDenial {
  ok: false;
  message: string;
}

/** What the request path needs of a key: the row with its policy and its owner's state (./key-verifier.ts). */
export interface KeyRow extends PolicyColumns {
  id: string;
  userId: number;
  keyHash: string;
  expiresAt: number | null;
  revokedAt: number | null;
  disabledAt: number | null;
}

/** A key that passed verification once: its row, its compiled policy (null: none) and the identity its requests carry. */
export interface VerifiedKey {
  ok: true;
  row: KeyRow;
  policy: CompiledPolicy | null;
  identity: Identity;
}

/** The request path's cache of verified keys by key hash, one per database (./key-verifier.ts). */
export const verifiedKeyCache = mapPerDatabase<string, VerifiedKey>();

/** Who is told when this process changes a key or its owner (the cluster tells the other replicas). */
const keyChangeListeners = mapPerDatabase<string, () => void>();

/** Calls `listener` after each forgetVerifiedKeys(db), under `name` (one per name). */
export function onKeysChanged(db: Db, name: string, listener: () => void): void {
  keyChangeListeners(db).set(name, listener);
}

/** Empties that cache: call after changing a key or its owner's state. */
export function forgetVerifiedKeys(db: Db): void {
  verifiedKeyCache(db).clear();
  for (const listener of keyChangeListeners(db).values()) listener();
}

export interface ApiKeyInfo extends PolicyColumns {
  id: string;
  userId: number;
  email: string;
  name: string;
  displayPrefix: string;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  lastUsedAt: number | null;
  /** When the owner's account was disabled (its keys are refused meanwhile), or null. */
  ownerDisabledAt: number | null;
}

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/**
 * Digit `i` (0-6) of a CRC-32 as 7 base32 characters: its 32 bits, big-endian, padded with 3 zero
 * bits. Digits 0-5 are bits 31-27, 26-22, ..., 6-2 of the CRC; digit 6 is its last 2 bits and the padding.
 */
function checksumDigit(crc: number, i: number): string {
  return BASE32[i < 6 ? (crc >>> (27 - 5 * i)) & 31 : (crc & 3) << 3];
}

function checksum(body: string): string {
  const crc = Bun.hash.crc32(body);
  let out = "";
  for (let i = 0; i < CHECK_LENGTH; i++) out += checksumDigit(crc, i);
  return out;
}

export function generateApiKey(): string {
  const body = randomToken(24);
  return `${KEY_PREFIX}${body}${checksum(body)}`;
}

/** `text` with every API-key-shaped word cut to its display prefix (`sk-mg-7t47cb…`): for messages that echo what was typed. */
export function maskApiKeys(text: string): string {
  return text.replace(KEY_LIKE, (key) => `${key.slice(0, KEY_PREFIX.length + 6)}…`);
}

/** Format and checksum only; no database. */
export function parseApiKey(key: string): { ok: true; hash: string } | KeyDenial {
  if (!KEY_FORMAT.test(key)) {
    return {
      ok: false,
      message: `The API key is malformed: modelgate keys are "${KEY_PREFIX}" followed by ${BODY_LENGTH + CHECK_LENGTH} characters a-z and 2-7`,
    };
  }
  const crc = Bun.hash.crc32(key.slice(KEY_PREFIX.length, CHECK_AT));
  for (let i = 0; i < CHECK_LENGTH; i++) {
    if (key[CHECK_AT + i] !== checksumDigit(crc, i)) {
      return { ok: false, message: "The API key's checksum does not match: it was mistyped, truncated or altered" };
    }
  }
  return { ok: true, hash: sha256Hex(key) };
}

export interface CreatedKey {
  id: string;
  key: string;
  displayPrefix: string;
  name: string;
}

export async function createApiKey(
  db: Db,
  input: { userId: number; name: string; expiresAt?: number | null; policy?: PolicyChange; now?: number },
): Promise<CreatedKey> {
  const key = generateApiKey();
  const name = keyName(input.name);
  const id = `key_${randomToken(10)}`;
  const displayPrefix = key.slice(0, KEY_PREFIX.length + 6);
  await db.insert(tablesOf(db).apiKeys).values({
    id,
    userId: input.userId,
    name,
    keyHash: sha256Hex(key),
    displayPrefix,
    ...input.policy,
    createdAt: input.now ?? Date.now(),
    expiresAt: input.expiresAt ?? null,
  });
  return { id, key, displayPrefix, name };
}

/** The longest key name, in characters; a longer one is refused by the CLI and the dashboard alike. */
export const KEY_NAME_MAX_CHARS = 100;

/** Whether a typed key name (trimmed) is longer than KEY_NAME_MAX_CHARS characters (an emoji is one). */
export function keyNameTooLong(raw: string): boolean {
  return [...raw.trim()].length > KEY_NAME_MAX_CHARS;
}

/**
 * A label as stored (a key's name, a ledger note): control and invisible format characters (a line
 * break, a terminal escape) become spaces, runs of spaces one, an API key pasted into it its
 * display prefix (labels are listed), at most `maxChars` characters (never half of one).
 */
export function storedLabel(raw: string, maxChars: number): string {
  const clean = maskApiKeys(raw.replace(/[\p{Cc}\p{Cf}\p{DI}\s]+/gu, " ").trim());
  return [...clean].slice(0, maxChars).join("");
}

/** Whether a listed key works now, and if not, the first reason a request with it is refused for. */
export function keyState(
  key: Pick<ApiKeyInfo, "revokedAt" | "expiresAt" | "ownerDisabledAt">,
  now: number,
): "revoked" | "expired" | "owner disabled" | "active" {
  if (key.revokedAt !== null) return "revoked";
  if (key.expiresAt !== null && key.expiresAt <= now) return "expired";
  return key.ownerDisabledAt === null ? "active" : "owner disabled";
}

/** A key's name as stored (storedLabel), or "default" when nothing is left. */
export function keyName(raw: string): string {
  return storedLabel(raw, KEY_NAME_MAX_CHARS) || "default";
}

export async function listApiKeys(db: Db, input: { userId?: number } = {}): Promise<ApiKeyInfo[]> {
  const { apiKeys, users } = tablesOf(db);
  const query = db
    .select({
      id: apiKeys.id,
      userId: apiKeys.userId,
      email: users.email,
      name: apiKeys.name,
      displayPrefix: apiKeys.displayPrefix,
      perMinute: apiKeys.perMinute,
      models: apiKeys.models,
      budgetMicro: apiKeys.budgetMicro,
      budgetPeriod: apiKeys.budgetPeriod,
      tokensPerMinute: apiKeys.tokensPerMinute,
      allowIps: apiKeys.allowIps,
      createdAt: apiKeys.createdAt,
      expiresAt: apiKeys.expiresAt,
      revokedAt: apiKeys.revokedAt,
      lastUsedAt: apiKeys.lastUsedAt,
      ownerDisabledAt: users.disabledAt,
    })
    .from(apiKeys)
    .innerJoin(users, eq(users.id, apiKeys.userId));
  const filtered = input.userId === undefined ? query : query.where(eq(apiKeys.userId, input.userId));
  return filtered.orderBy(desc(apiKeys.createdAt), apiKeys.id);
}

/**
 * With `userId`, only that user's key can be revoked (the dashboard); without, any (admin, CLI).
 * One conditional update decides, so two revocations at once answer "revoked" once.
 */
export async function revokeApiKey(
  db: Db,
  keyId: string,
  options: { userId?: number; now?: number } = {},
): Promise<"revoked" | "already_revoked" | "not_found"> {
  const { apiKeys } = tablesOf(db);
  const owned = options.userId === undefined ? eq(apiKeys.id, keyId) : and(eq(apiKeys.id, keyId), eq(apiKeys.userId, options.userId));
  const revoked = await db
    .update(apiKeys)
    .set({ revokedAt: options.now ?? Date.now() })
    .where(and(owned, isNull(apiKeys.revokedAt)))
    .returning({ id: apiKeys.id });
  if (revoked.length === 0) {
    const [row] = await db.select({ id: apiKeys.id }).from(apiKeys).where(owned).limit(1);
    return row === undefined ? "not_found" : "already_revoked";
  }
  forgetVerifiedKeys(db);
  return "revoked";
}
