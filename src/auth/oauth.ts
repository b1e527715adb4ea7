/**
 * GitHub and Google sign-in through arctic's OAuth2Client, so every endpoint can be overridden
 * from `[auth.github]` / `[auth.google]` (GitHub Enterprise, or a loopback stand-in in tests).
 * The state (and Google's PKCE verifier) lives in short-lived HttpOnly cookies scoped to /auth;
 * the callback compares the state in constant time before it exchanges the code.
 *
 * Linking: a provider account already linked signs in its user; otherwise a *verified* email
 * that matches an existing user links to it; otherwise a new user is created if `auth.signup`
 * allows that email. An unverified email never links or creates anything.
 */
import { and, eq } from "drizzle-orm";
import { CodeChallengeMethod, OAuth2Client, generateCodeVerifier, generateState } from "arctic";
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { oauthAccounts } from "../db/schema";
import { createUser, findUserByEmail, findUserById, normalizeEmail, signupRefusal, type User } from "./users";
import { equalSecrets } from "./tokens";
import type { RefusalCode } from "./refusal";

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

export interface OAuthProfile {
  provider: Provider;
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
): Promise<OAuthProfile | OAuthFailure> {
  const p = setup(config, provider);
  if (!p) return { error: `${provider} sign-in is not configured`, status: 400, reason: "oauth_unavailable" };
  if (!input.state || !input.expectedState || !equalSecrets(input.state, input.expectedState)) {
    return { error: "OAuth state mismatch: start signing in again", status: 400, reason: "oauth_state" };
  }
  if (!input.code) return { error: "the provider sent no authorization code", status: 400, reason: "oauth_failed" };
  if (provider === "google" && !input.verifier) return { error: "the PKCE verifier cookie is missing: start signing in again", status: 400, reason: "oauth_state" };
  let accessToken: string;
  try {
    accessToken = (await p.client.validateAuthorizationCode(p.token, input.code, input.verifier)).accessToken();
  } catch {
    return { error: `${provider} did not accept the authorization code`, status: 502, reason: "oauth_failed" };
  }
  try {
    return provider === "github" ? await githubProfile(p.api, accessToken) : await googleProfile(p.api, accessToken);
  } catch {
    return { error: `could not read the ${provider} profile`, status: 502, reason: "oauth_failed" };
  }
}

async function getJson(url: string, accessToken: string): Promise<unknown> {
  const response = await fetch(url, {
    headers: { authorization: `Bearer ${accessToken}`, accept: "application/json", "user-agent": "modelgate" },
    signal: AbortSignal.timeout(10_000),
  });
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return response.json();
}

async function githubProfile(api: string, accessToken: string): Promise<OAuthProfile> {
  const user = (await getJson(`${api}/user`, accessToken)) as { id?: unknown };
  if (typeof user?.id !== "number" && typeof user?.id !== "string") throw new Error("no user id");
  const emails = await getJson(`${api}/user/emails`, accessToken);
  const list = Array.isArray(emails) ? (emails as Array<{ email?: unknown; primary?: unknown; verified?: unknown }>) : [];
  const verified = list.filter((e) => e.verified === true && typeof e.email === "string");
  const chosen = verified.find((e) => e.primary === true) ?? verified[0];
  return { provider: "github", providerUserId: String(user.id), email: chosen ? String(chosen.email) : null, emailVerified: chosen !== undefined };
}

async function googleProfile(api: string, accessToken: string): Promise<OAuthProfile> {
  const info = (await getJson(`${api}/userinfo`, accessToken)) as { sub?: unknown; email?: unknown; email_verified?: unknown };
  if (typeof info?.sub !== "string" || info.sub === "") throw new Error("no subject");
  const email = typeof info.email === "string" ? info.email : null;
  return { provider: "google", providerUserId: info.sub, email, emailVerified: email !== null && (info.email_verified === true || info.email_verified === "true") };
}

/** The user this provider account signs in as, linking or creating one as the header says. */
export async function userForProfile(db: Db, config: Config, profile: OAuthProfile): Promise<User | OAuthFailure> {
  const name = profile.provider === "github" ? "GitHub" : "Google";
  const link = db
    .select({ userId: oauthAccounts.userId })
    .from(oauthAccounts)
    .where(and(eq(oauthAccounts.provider, profile.provider), eq(oauthAccounts.providerUserId, profile.providerUserId)))
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
    db.insert(oauthAccounts).values({ provider: profile.provider, providerUserId: profile.providerUserId, userId: user.id }).onConflictDoNothing().run();
  }
  if (user.disabledAt !== null) return { error: "this account is disabled", status: 403, reason: "disabled" };
  return user;
}
