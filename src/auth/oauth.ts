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
 * Talking to the provider after its redirect (the code exchange, the profile) is ./oauth-calls.ts.
 */
import { and, eq } from "drizzle-orm";
import { CodeChallengeMethod, OAuth2Client, generateCodeVerifier, generateState } from "arctic";
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { isUniqueViolation, postgresOf, tablesOf } from "../db/engine";
import { createUser, findUserByEmail, findUserById, signupRefusal, type User } from "./users";
import { normalizeEmail } from "./email";
import { equalSecrets } from "./tokens";
import type { RefusalCode } from "./refusal";
import { exchangeCode, PROVIDER_TIMEOUT_MS, readProfile, type OAuthProfile, type Provider, type ProviderEndpoints } from "./oauth-calls";

export type { Provider };

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

interface ProviderSetup extends ProviderEndpoints {
  authorize: string;
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
  if (provider === "google" && !input.verifier)
    return { error: "the PKCE verifier cookie is missing: start signing in again", status: 400, reason: "oauth_state" };
  const accessToken = await exchangeCode(provider, p, { code: input.code, verifier: input.verifier }, timeoutMs);
  if (accessToken === null) return { error: `${provider} did not accept the authorization code`, status: 502, reason: "oauth_failed" };
  const profile = await readProfile(provider, p, accessToken, timeoutMs);
  return profile ?? { error: `could not read the ${provider} profile`, status: 502, reason: "oauth_failed" };
}

/** The user this provider account signs in as, linking or creating one as the header says. */
export async function userForProfile(db: Db, config: Config, profile: OAuthProfile): Promise<User | OAuthFailure> {
  const name = profile.provider === "github" ? "GitHub" : "Google";
  const key = linkKey(profile.provider, profile.server);
  const { oauthAccounts } = tablesOf(db);
  const [link] = await db
    .select({ userId: oauthAccounts.userId })
    .from(oauthAccounts)
    .where(and(eq(oauthAccounts.provider, key), eq(oauthAccounts.providerUserId, profile.providerUserId)))
    .limit(1);
  let user = link ? await findUserById(db, link.userId) : null;
  if (!user) {
    if (!profile.emailVerified || profile.email === null)
      return { error: `your ${name} account has no verified email address`, status: 403, reason: "oauth_unverified" };
    const email = normalizeEmail(profile.email);
    if (email === null)
      return {
        error: `the verified email address of your ${name} account is not one this gateway accepts as an address`,
        status: 403,
        reason: "oauth_email_invalid",
      };
    user = await findUserByEmail(db, email);
    // A password sign-up never proved its address: whoever made it may not be the address's owner.
    if (user?.emailUnverified) {
      return {
        error: `an account with ${email} was made by a password sign-up, which does not prove the address, so ${name} sign-in cannot join it; sign in with its password`,
        status: 403,
        reason: "oauth_unproven_account",
      };
    }
    if (!user) {
      const refusal = signupRefusal(config.auth, email);
      if (refusal) return { error: refusal, status: 403, reason: config.auth.signup === "closed" ? "signup_closed" : "signup_domain" };
      const created = await createUser(db, { email });
      if ("error" in created) return { error: created.error, status: 400, reason: "oauth_failed" };
      user = created;
    }
    await db.insert(oauthAccounts).values({ provider: key, providerUserId: profile.providerUserId, userId: user.id }).onConflictDoNothing();
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
 * A legacy link whose stamped form already exists is left as it is (SQLite's UPDATE OR IGNORE).
 */
export async function stampLegacyLinks(db: Db, config: Config): Promise<number> {
  let stamped = 0;
  for (const provider of ["github", "google"] as const) {
    const p = setup(config, provider);
    if (p) stamped += await stampLinks(db, { from: provider, to: linkKey(provider, new URL(p.api).origin) });
  }
  return stamped;
}

async function stampLinks(db: Db, change: { from: string; to: string }): Promise<number> {
  const pg = postgresOf(db);
  if (pg === null) {
    const update = db.$client.query<unknown, [string, string]>("UPDATE OR IGNORE oauth_accounts SET provider = ? WHERE provider = ?");
    return update.run(change.to, change.from).changes;
  }
  // Postgres has no UPDATE OR IGNORE: the rows whose stamped form exists are left out. A sign-in
  // at another replica may add such a form meanwhile; the update then fails whole, and a second
  // pass leaves that row out too.
  for (let attempt = 1; ; attempt++) {
    try {
      const updated = await pg`UPDATE oauth_accounts AS a SET provider = ${change.to}
          WHERE a.provider = ${change.from}
            AND NOT EXISTS (SELECT 1 FROM oauth_accounts b WHERE b.provider = ${change.to} AND b.provider_user_id = a.provider_user_id)`;
      return updated.count;
    } catch (err) {
      if (attempt === 3 || !isUniqueViolation(err)) throw err;
    }
  }
}
