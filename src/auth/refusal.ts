/**
 * Why a browser sign-in, sign-up, first-run setup or OAuth attempt was refused, as a closed set
 * of short codes shared by the identities routes (which decide) and the pages (which explain).
 * A form post that is refused is redirected back to its page with `?error=CODE`; the page looks
 * the message up here. Only the code travels in the URL, so a link can never put text of its own
 * on a page, and no email, password or token ever lands in a URL, a log or a page this way. An
 * unknown code shows nothing. JSON callers get the gateway's error body instead.
 *
 *   refusal(code, errorCode, message) -> Refusal (what the routes decide)
 *   refusalMessage(code, auth) -> string | null
 *   safeNext(value) -> a /dashboard path (the only places a sign-in may lead to)
 */
import type { Config } from "../config/schema";
import { GatewayError, type ErrorCode } from "../errors";
import { allowedDomains } from "./email";
import { PASSWORD_MAX, PASSWORD_MIN } from "./password";

const MESSAGES = {
  credentials: "The email or password is incorrect.",
  disabled: "This account is disabled. Ask an administrator to enable it.",
  throttled: "Too many attempts. Wait a minute, then try again.",
  origin: "This form was not sent from this gateway's own page. Reload the page and try again.",
  email: "Enter a valid email address.",
  password: `The password must be ${PASSWORD_MIN} to ${PASSWORD_MAX} characters.`,
  email_taken: "An account with this email already exists. Sign in instead.",
  signup_closed: "Sign-up is closed on this gateway; ask an administrator for an account.",
  signup_domain: "Sign-up is limited to some addresses.",
  oauth_cancelled: "Sign-in was cancelled or refused at the provider.",
  oauth_state: "The sign-in could not be verified: it took too long or was started in another window. Start again.",
  oauth_unverified: "Your account at the provider has no verified email address, so it cannot sign in here.",
  oauth_email_invalid:
    "Your verified email address at the provider is not one this gateway accepts (it has spaces, invisible characters or a trailing dot, or is too long).",
  oauth_unproven_account:
    "An account with this email was made by a password sign-up, which does not prove the address, so this sign-in cannot join it. Sign in with its password.",
  oauth_failed: "The provider could not complete the sign-in. Try again in a moment.",
  oauth_unavailable: "That sign-in method is not configured on this gateway.",
  setup_invalid: "This setup link is invalid, expired or already used.",
  setup_email_taken: "That address already has an account, made by a sign-up that did not prove the address. Choose another address for the administrator.",
  signed_out: "Your session had ended, so the form you sent was not acted on. Sign in, then send it again.",
} as const;

export type RefusalCode = keyof typeof MESSAGES;

/** The message for a code from a URL, or null when it is not one of ours. */
export function refusalMessage(code: unknown, auth: Pick<Config["auth"], "allowed_domains">): string | null {
  if (typeof code !== "string" || !Object.hasOwn(MESSAGES, code)) return null;
  if (code === "signup_domain" && auth.allowed_domains.length > 0) {
    return `Sign-up is limited to addresses at ${allowedDomains(auth).join(", ")}.`;
  }
  return MESSAGES[code as RefusalCode];
}

/**
 * A safe place to go after signing in: a path under /dashboard made of plain characters, never
 * another site (no scheme, no `//`, no backslash, no query), else /dashboard itself.
 */
export function safeNext(value: unknown): string {
  // Dashboard paths are short; a long one would not fit the sign-in cookie that carries it (4 KB).
  return typeof value === "string" && value.length <= 200 && /^\/dashboard(\/[A-Za-z0-9_-]+)*\/?$/.test(value) ? value : "/dashboard";
}

/** A refusal: the code a page explains, and the error a JSON caller gets. */
export interface Refusal {
  reason: RefusalCode;
  error: GatewayError;
}

/** Where a refused form post goes back to, and what it keeps. */
export interface Back {
  page: string;
  next?: string;
  token?: string;
  cookies?: string[];
}

export function refusal(reason: RefusalCode, code: ErrorCode, message: string, options: { param?: string; headers?: Record<string, string> } = {}): Refusal {
  return { reason, error: new GatewayError(code, message, options) };
}

export function incorrect(): Refusal {
  return refusal("credentials", "invalid_credentials", "The email or password is incorrect");
}
