/**
 * Device cookies: what keeps the per-account sign-in throttle from locking an account's owner out.
 * A browser that signs in to an account with its password (or signs up) gets a device token in
 * `mg_device`: the account's id, a random nonce, and a MAC of the two keyed by the account's
 * password hash. The cookie holds the tokens of the last MAX_TOKENS accounts signed in to from that
 * browser (someone with an admin and a personal account), one per account, separated by `~`. A
 * sign-in attempt that carries a valid token for the account typed is throttled per device instead
 * of per account (./throttle.ts), so somebody guessing passwords for an address elsewhere uses up
 * the account's attempts, not its owner's.
 *
 * Invariants: nothing is stored (the key is the password hash, which the sign-in reads anyway),
 * so setting a new password voids every token of the account; a token names only an account its
 * holder signed in to; the cookie is sent only to the sign-in and sign-up routes.
 */
import { createHmac } from "node:crypto";
import { equalSecrets, randomToken } from "./tokens";

export const DEVICE_COOKIE = "mg_device";
/** Sign-in reads it; sign-up, which sets it too, must see the tokens it already holds. */
export const DEVICE_COOKIE_PATH = "/auth";
export const DEVICE_COOKIE_MAX_AGE_S = 180 * 86_400;

const NONCE_BYTES = 15;
const MAX_TOKENS = 5;
/** Parts read of the cookies sent: a browser may send more than one (an older release set one at /auth/login). */
const MAX_PARTS = 16;
const SEPARATOR = "~";
const TOKEN = /^([1-9][0-9]{0,14})\.([a-z2-7]{24})\.([A-Za-z0-9_-]{43})$/;

/** The account a device token is for: its id and its password hash (null: no password, no token). */
export interface DeviceAccount {
  id: number;
  passwordHash: string | null;
}

/**
 * The device cookie's new value after signing in to `account`: a new token for it first, then the
 * other accounts' tokens of `previous` (the cookies as sent), MAX_TOKENS in all. Null when the
 * account has no password (nothing to throttle).
 */
export function issueDeviceCookie(account: DeviceAccount, previous: string[]): string | null {
  if (account.passwordHash === null) return null;
  const nonce = randomToken(NONCE_BYTES);
  const tokens = [`${account.id}.${nonce}.${deviceMac(account.id, account.passwordHash, nonce)}`];
  const ids = new Set([account.id]);
  for (const token of tokensOf(previous)) {
    const id = Number(TOKEN.exec(token)?.[1]);
    if (!Number.isNaN(id) && !ids.has(id) && tokens.length < MAX_TOKENS) {
      ids.add(id);
      tokens.push(token);
    }
  }
  return tokens.join(SEPARATOR);
}

/**
 * The device the cookies sent name for `account` (a key for the throttle): a token for the account
 * issued with its current password; otherwise null.
 */
export function deviceOf(values: string[], account: DeviceAccount): string | null {
  if (account.passwordHash === null) return null;
  for (const token of tokensOf(values)) {
    const parts = TOKEN.exec(token);
    if (parts === null || Number(parts[1]) !== account.id) continue;
    const [, , nonce, mac] = parts;
    if (equalSecrets(mac, deviceMac(account.id, account.passwordHash, nonce))) return `${account.id}:${nonce}`;
  }
  return null;
}

function tokensOf(values: string[]): string[] {
  return values.join(SEPARATOR).split(SEPARATOR, MAX_PARTS);
}

function deviceMac(userId: number, passwordHash: string, nonce: string): string {
  return createHmac("sha256", passwordHash).update(`modelgate device ${userId} ${nonce}`).digest("base64url");
}
