/**
 * Device cookies: what keeps the per-account sign-in throttle from locking an account's owner out.
 * A browser that signs in to an account with its password gets `mg_device`: a random nonce and a
 * MAC of the account's id and the nonce, keyed by the account's password hash. A sign-in attempt
 * that carries a valid one for the account typed is throttled per device instead of per account
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

/** The account a device cookie is for: its id and its password hash (null: no password, no cookie). */
export interface DeviceAccount {
  id: number;
  passwordHash: string | null;
}

/** A new device cookie's value for `account`, or null when it has no password. */
export function issueDeviceCookie(account: DeviceAccount): string | null {
  if (account.passwordHash === null) return null;
  const nonce = randomToken(NONCE_BYTES);
  return `${nonce}.${deviceMac(account.id, account.passwordHash, nonce)}`;
}

/**
 * The device a cookie value names (a key for the throttle), when it was issued for `account` and
 * the account's password has not changed since; otherwise null.
 */
export function deviceOf(value: string | null, account: DeviceAccount): string | null {
  if (value === null || account.passwordHash === null) return null;
  const dot = value.indexOf(".");
  if (dot <= 0) return null;
  const nonce = value.slice(0, dot);
  const valid = equalSecrets(value.slice(dot + 1), deviceMac(account.id, account.passwordHash, nonce));
  return valid ? `${account.id}:${nonce}` : null;
}

function deviceMac(userId: number, passwordHash: string, nonce: string): string {
  return createHmac("sha256", passwordHash).update(`modelgate device ${userId} ${nonce}`).digest("base64url");
}
