/**
 * Device cookies: what keeps the per-account sign-in throttle from locking an account's owner out.
 * A browser that signs in to an account with its password gets a device token in `mg_device`: a
 * random nonce and a MAC of the account's id and the nonce, keyed by the account's password hash.
 * The cookie holds the tokens of the last MAX_TOKENS accounts signed in to from that browser
 * (someone with an admin and a personal account), separated by `~`. A sign-in attempt that
 * carries a valid token for the account typed is throttled per device instead of per account
 * (./throttle.ts), so somebody guessing passwords for an address elsewhere uses up the account's
 * attempts, not its owner's.
 *
 * Invariants: nothing is stored (the key is the password hash, which the sign-in reads anyway),
 * so setting a new password voids every device cookie of the account; the value says nothing about
 * the account; the cookie is sent only to the sign-in route.
 */
import { createHmac } from "node:crypto";
import { equalSecrets, randomToken } from "./tokens";

export const DEVICE_COOKIE = "mg_device";
/** Only the password sign-in reads it. */
export const DEVICE_COOKIE_PATH = "/auth/login";
export const DEVICE_COOKIE_MAX_AGE_S = 180 * 86_400;

const NONCE_BYTES = 15;
const MAX_TOKENS = 5;
const SEPARATOR = "~";

/** The account a device cookie is for: its id and its password hash (null: no password, no cookie). */
export interface DeviceAccount {
  id: number;
  passwordHash: string | null;
}

/**
 * The device cookie's new value after signing in to `account`: a new token for it first, then the
 * other accounts' tokens of `previous` (the cookie as sent), MAX_TOKENS in all. Null when the
 * account has no password (nothing to throttle).
 */
export function issueDeviceCookie(account: DeviceAccount, previous: string | null): string | null {
  if (account.passwordHash === null) return null;
  const nonce = randomToken(NONCE_BYTES);
  const others = tokensOf(previous).filter((token) => deviceOfToken(token, account) === null);
  return [`${nonce}.${deviceMac(account.id, account.passwordHash, nonce)}`, ...others].slice(0, MAX_TOKENS).join(SEPARATOR);
}

/**
 * The device a cookie value names for `account` (a key for the throttle): one of its tokens was
 * issued for the account, and the account's password has not changed since; otherwise null.
 */
export function deviceOf(value: string | null, account: DeviceAccount): string | null {
  for (const token of tokensOf(value)) {
    const device = deviceOfToken(token, account);
    if (device !== null) return device;
  }
  return null;
}

function tokensOf(value: string | null): string[] {
  return value === null ? [] : value.split(SEPARATOR, MAX_TOKENS);
}

function deviceOfToken(token: string, account: DeviceAccount): string | null {
  if (account.passwordHash === null) return null;
  const dot = token.indexOf(".");
  if (dot <= 0) return null;
  const nonce = token.slice(0, dot);
  const valid = equalSecrets(token.slice(dot + 1), deviceMac(account.id, account.passwordHash, nonce));
  return valid ? `${account.id}:${nonce}` : null;
}

function deviceMac(userId: number, passwordHash: string, nonce: string): string {
  return createHmac("sha256", passwordHash).update(`modelgate device ${userId} ${nonce}`).digest("base64url");
}
