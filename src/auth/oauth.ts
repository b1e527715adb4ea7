/**
 * GitHub and Google sign-in through arctic's OAuth2Client, so every endpoint can be overridden
 * from `[auth.github]` / `[auth.google]` (GitHub Enterprise, or a loopback stand-in in tests).
 * The state (and Google's PKCE verifier) lives in short-lived HttpOnly cookies scoped to /auth;
 * the callback compares the state in constant time before it exchanges the code.
 *
 * Linking: a provider account already linked signs in its user; otherwise a *verified* email
 * that matches an existing user links to it; otherwise a new user is created if `auth.signup`
 * allows that email. An unverified email never links or creates anything. A link is stored under
 * the provider and the origin of the API its account id came from (linkKey): ids are only unique
 * within one server (GitHub Enterprise numbers its users from 1 as github.com does), so a link
 * made at one never signs in the holder of the same id at another.
 *
 * The code exchange and each profile read are bounded (10 s; a profile answer of at most 1 MiB),
 * and a failure at the provider is logged by provider, step and status, never with its text.
 */
import { and, eq } from "drizzle-orm";
import { ArcticFetchError, CodeChallengeMethod, OAuth2Client, OAuth2RequestError, generateCodeVerifier, generateState } from "arctic";
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { oauthAccounts } from "../db/schema";
import { createUser, findUserByEmail, findUserById, normalizeEmail, signupRefusal, type User } from "./users";
import { equalSecrets } from "./tokens";
import type { RefusalCode } from "./refusal";
import { log } from "../log";

export type Provider = "github" | "google";
export const STATE_COOKIE = "mg_oauth_state";
export const VERIFIER_COOKIE = "mg_oauth_verifier";

const ENDPOINTS: Record<Provider, { authorize: string; token: string; api: string; scopes: string[] }> = {
  github: {
    authorize: "https://github.com/login/oauth/authorize",
    token: "https://github.com/login/oauth/access_token",
    api: "https://api.github.com",
    scopes: ["read:user", "user:email"],
  },
  google: {
    authorize: "https://accounts.google.com/o/oauth2/v2/auth",
    token: "https://oauth2.googleapis.com/token",
    api: "https://openidconnect.googleapis.com/v1",
    scopes: ["openid", "email", "profile"],
  },
};

/** How long the code exchange and each profile read may take. */
const PROVIDER_TIMEOUT_MS = 10_000;
const PROFILE_MAX_BYTES = 1_048_576;

export interface OAuthProfile {
  provider: Provider;
  /** The origin of the API that gave providerUserId: the namespace of the id. */
  server: string;
  providerUserId: string;
  email: string | null;
  emailVerified: boolean;
}

interface ProviderSetup {
  client: OAuth2Client;
  authorize: string;
  token: string;
  api: string;
}

function setup(config: Config, provider: Provider): ProviderSetup | null {
  const settings = config.auth[provider];
  if (!settings) return null;
  const defaults = ENDPOINTS[provider];
  const redirect = `${config.server.public_url.replace(/\/+$/, "")}/auth/${provider}/callback`;
  return {
    client: new OAuth2Client(settings.client_id, settings.client_secret, redirect),
    authorize: settings.authorize_url ?? defaults.authorize,
    token: settings.token_url ?? defaults.token,
    api: (settings.api_url ?? defaults.api).replace(/\/+$/, ""),
  };
}

/** The provider's authorization URL plus the state (and PKCE verifier) to keep in cookies. */
export function startOAuth(config: Config, provider: Provider): { url: URL; state: string; verifier: string | null } | null {
  const p = setup(config, provider);
  if (!p) return null;
  const state = generateState();
  if (provider === "github") return { url: p.client.createAuthorizationURL(p.authorize, state, ENDPOINTS.github.scopes), state, verifier: null };
  const verifier = generateCodeVerifier();
  const url = p.client.createAuthorizationURLWithPKCE(p.authorize, state, CodeChallengeMethod.S256, verifier, ENDPOINTS.google.scopes);
  return { url, state, verifier };
}

/** `error` for JSON callers; `reason` picks the message the sign-in page shows (refusal.ts). */
export type OAuthFailure = { error: string; status: 400 | 403 | 502; reason: RefusalCode };

/** Checks the state, exchanges the code and reads the provider's profile. */
export async function finishOAuth(
  config: Config,
  provider: Provider,
  input: { code: string | null; state: string | null; expectedState: string | null; verifier: string | null },
  options: { timeoutMs?: number } = {},
): Promise<OAuthProfile | OAuthFailure> {
  const timeoutMs = options.timeoutMs ?? PROVIDER_TIMEOUT_MS;
  const p = setup(config, provider);
  if (!p) return { error: `${provider} sign-in is not configured`, status: 400, reason: "oauth_unavailable" };
  if (!input.state || !input.expectedState || !equalSecrets(input.state, input.expectedState)) {
    return { error: "OAuth state mismatch: start signing in again", status: 400, reason: "oauth_state" };
  }
  if (!input.code) return { error: "the provider sent no authorization code", status: 400, reason: "oauth_failed" };
  if (provider === "google" && !input.verifier) return { error: "the PKCE verifier cookie is missing: start signing in again", status: 400, reason: "oauth_state" };
  let accessToken: string;
  try {
    accessToken = (await withinTimeout(p.client.validateAuthorizationCode(p.token, input.code, input.verifier), timeoutMs)).accessToken();
  } catch (error) {
    logFailure(provider, "code exchange", error, timeoutMs);
    return { error: `${provider} did not accept the authorization code`, status: 502, reason: "oauth_failed" };
  }
  try {
    const call: ProfileCall = { api: p.api, server: new URL(p.api).origin, accessToken, timeoutMs };
    return provider === "github" ? await githubProfile(call) : await googleProfile(call);
  } catch (error) {
    logFailure(provider, "profile read", error, timeoutMs);
    return { error: `could not read the ${provider} profile`, status: 502, reason: "oauth_failed" };
  }
}

/**
 * What an operator needs to tell a wrong client secret or endpoint from a user's cancel: the
 * step and what went wrong (an OAuth error code, an HTTP status, no answer), never the provider's
 * text, which may echo the code or a token.
 */
function logFailure(provider: Provider, step: string, error: unknown, timeoutMs: number): void {
  log("warn", `${provider} sign-in failed at the ${step}`, { provider, step, cause: failureCause(error, timeoutMs) });
}

function failureCause(error: unknown, timeoutMs: number): string {
  if (error instanceof OAuth2RequestError) return /^[a-z_]{1,40}$/.test(error.code) ? `the provider answered ${error.code}` : "the provider answered an OAuth error";
  const { status, name, code } = (error ?? {}) as { status?: unknown; name?: unknown; code?: unknown };
  if (typeof status === "number") return `HTTP ${status}`;
  if (name === "TimeoutError") return `no answer within ${timeoutMs / 1000} s`;
  if (error instanceof ArcticFetchError || (typeof code === "string" && /^[A-Za-z_]{1,40}$/.test(code))) return "the provider could not be reached";
  if (error instanceof RangeError) return "the answer is over 1 MiB";
  if (error instanceof SyntaxError) return "the answer is not JSON";
  return "the answer lacks what sign-in needs";
}

/** arctic's fetch takes no signal: the exchange is abandoned (not cancelled) after the timeout. */
function withinTimeout<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: Timer | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DOMException("the provider did not answer in time", "TimeoutError")), timeoutMs);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

class ProviderStatus extends Error {
  constructor(readonly status: number) {
    super(`HTTP ${status}`);
  }
}

/** A profile read: where, with which token, and how long it may take. */
interface ProfileCall {
  api: string;
  /** The origin of `api`: the namespace of the account ids it gives. */
  server: string;
  accessToken: string;
  timeoutMs: number;
}

async function getJson(call: ProfileCall, path: string): Promise<unknown> {
  const response = await fetch(`${call.api}${path}`, {
    headers: { authorization: `Bearer ${call.accessToken}`, accept: "application/json", "user-agent": "modelgate" },
    signal: AbortSignal.timeout(call.timeoutMs),
  });
  if (!response.ok) throw new ProviderStatus(response.status);
  return JSON.parse(await boundedText(response, PROFILE_MAX_BYTES));
}

/** The body as text, or a RangeError once it passes `limit` bytes (the rest is not read). */
async function boundedText(response: Response, limit: number): Promise<string> {
  if (Number(response.headers.get("content-length") ?? 0) > limit) throw new RangeError("profile answer too large");
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of (response.body ?? []) as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) throw new RangeError("profile answer too large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function githubProfile(call: ProfileCall): Promise<OAuthProfile> {
  const user = (await getJson(call, "/user")) as { id?: unknown };
  if (typeof user?.id !== "number" && typeof user?.id !== "string") throw new Error("no user id");
  const emails = await getJson(call, "/user/emails");
  const list = Array.isArray(emails) ? (emails as Array<{ email?: unknown; primary?: unknown; verified?: unknown }>) : [];
  const verified = list.filter((e) => e.verified === true && typeof e.email === "string");
  const chosen = verified.find((e) => e.primary === true) ?? verified[0];
  return { provider: "github", server: call.server, providerUserId: String(user.id), email: chosen ? String(chosen.email) : null, emailVerified: chosen !== undefined };
}

async function googleProfile(call: ProfileCall): Promise<OAuthProfile> {
  const info = (await getJson(call, "/userinfo")) as { sub?: unknown; email?: unknown; email_verified?: unknown };
  if (typeof info?.sub !== "string" || info.sub === "") throw new Error("no subject");
  const email = typeof info.email === "string" ? info.email : null;
  return { provider: "google", server: call.server, providerUserId: info.sub, email, emailVerified: email !== null && (info.email_verified === true || info.email_verified === "true") };
}

/** The user this provider account signs in as, linking or creating one as the header says. */
export async function userForProfile(db: Db, config: Config, profile: OAuthProfile): Promise<User | OAuthFailure> {
  const name = profile.provider === "github" ? "GitHub" : "Google";
  const key = linkKey(profile.provider, profile.server);
  const link = db
    .select({ userId: oauthAccounts.userId })
    .from(oauthAccounts)
    .where(and(eq(oauthAccounts.provider, key), eq(oauthAccounts.providerUserId, profile.providerUserId)))
    .get();
  let user = link ? findUserById(db, link.userId) : null;
  if (!user) {
    const email = profile.emailVerified ? normalizeEmail(profile.email) : null;
    if (email === null) return { error: `your ${name} account has no verified email address`, status: 403, reason: "oauth_unverified" };
    user = findUserByEmail(db, email);
    // A password sign-up never proved its address: whoever made it may not be the address's owner.
    if (user?.emailUnverified) {
      return { error: `an account with ${email} was made by a password sign-up, which does not prove the address, so ${name} sign-in cannot join it; sign in with its password`, status: 403, reason: "oauth_unproven_account" };
    }
    if (!user) {
      const refusal = signupRefusal(config.auth, email);
      if (refusal) return { error: refusal, status: 403, reason: config.auth.signup === "closed" ? "signup_closed" : "signup_domain" };
      const created = await createUser(db, { email });
      if ("error" in created) return { error: created.error, status: 400, reason: "oauth_failed" };
      user = created;
    }
    db.insert(oauthAccounts).values({ provider: key, providerUserId: profile.providerUserId, userId: user.id }).onConflictDoNothing().run();
  }
  if (user.disabledAt !== null) return { error: "this account is disabled", status: 403, reason: "disabled" };
  return user;
}

/** The `provider` column of a link: the provider and the origin of its API (`github https://api.github.com`). */
function linkKey(provider: Provider, server: string): string {
  return `${provider} ${server}`;
}

/**
 * Links stored before they named their server (the provider alone) are taken to come from the
 * server configured now, the one most likely to have made them; run at start. Returns how many.
 */
export function stampLegacyLinks(db: Db, config: Config): number {
  let stamped = 0;
  for (const provider of ["github", "google"] as const) {
    const p = setup(config, provider);
    if (!p) continue;
    const update = db.$client.query<unknown, [string, string]>("UPDATE OR IGNORE oauth_accounts SET provider = ? WHERE provider = ?");
    stamped += update.run(linkKey(provider, new URL(p.api).origin), provider).changes;
  }
  return stamped;
}
