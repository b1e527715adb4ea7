/**
 * The calls an OAuth sign-in makes to its provider after the redirect: the code exchange (arctic)
 * and the profile reads. Each is bounded (PROVIDER_TIMEOUT_MS; a profile answer of at most
 * PROFILE_MAX_BYTES). A failure is a null for the caller and one log line for the operator,
 * naming the provider, the step and a cause from a fixed list (an OAuth error code, an HTTP
 * status, no answer), never the provider's own text, which may echo the code or a token.
 */
import { ArcticFetchError, OAuth2RequestError, type OAuth2Client } from "arctic";
import { log } from "../log";
import { responseText } from "../response-text";

export type Provider = "github" | "google";
export const PROVIDER_TIMEOUT_MS = 10_000;
const PROFILE_MAX_BYTES = 1_048_576;

export interface OAuthProfile {
  provider: Provider;
  /** The origin of the API that gave providerUserId: the namespace of the id. */
  server: string;
  providerUserId: string;
  email: string | null;
  emailVerified: boolean;
}

/** Where a provider's token and profile endpoints are, and the client that calls them. */
export interface ProviderEndpoints {
  client: OAuth2Client;
  token: string;
  /** The API base, without a trailing slash. */
  api: string;
}

/**
 * The access token for the authorization code, or null (logged). arctic's fetch takes no signal,
 * so after the timeout the exchange is abandoned rather than cancelled.
 */
export async function exchangeCode(
  provider: Provider,
  endpoints: ProviderEndpoints,
  grant: { code: string; verifier: string | null },
  timeoutMs: number,
): Promise<string | null> {
  let timer: Timer | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DOMException("the provider did not answer in time", "TimeoutError")), timeoutMs);
  });
  try {
    const tokens = await Promise.race([endpoints.client.validateAuthorizationCode(endpoints.token, grant.code, grant.verifier), timeout]);
    return tokens.accessToken();
  } catch (error) {
    logFailure(provider, "code exchange", error, timeoutMs);
    return null;
  } finally {
    clearTimeout(timer);
  }
}

/** The profile the access token belongs to, or null (logged). */
export async function readProfile(provider: Provider, endpoints: ProviderEndpoints, accessToken: string, timeoutMs: number): Promise<OAuthProfile | null> {
  const call: ProfileCall = { api: endpoints.api, server: new URL(endpoints.api).origin, accessToken, timeoutMs };
  try {
    return provider === "github" ? await githubProfile(call) : await googleProfile(call);
  } catch (error) {
    logFailure(provider, "profile read", error, timeoutMs);
    return null;
  }
}

function logFailure(provider: Provider, step: string, error: unknown, timeoutMs: number): void {
  log("warn", `${provider} sign-in failed at the ${step}`, { provider, step, cause: failureCause(error, timeoutMs) });
}

function failureCause(error: unknown, timeoutMs: number): string {
  if (error instanceof OAuth2RequestError)
    return /^[a-z_]{1,40}$/.test(error.code) ? `the provider answered ${error.code}` : "the provider answered an OAuth error";
  const { status, name, code } = (error ?? {}) as { status?: unknown; name?: unknown; code?: unknown };
  if (typeof status === "number") return `HTTP ${status}`;
  if (name === "TimeoutError") return `no answer within ${timeoutMs / 1000} s`;
  if (error instanceof ArcticFetchError || (typeof code === "string" && /^[A-Za-z_]{1,40}$/.test(code))) return "the provider could not be reached";
  if (error instanceof RangeError) return `the answer is over ${PROFILE_MAX_BYTES / 1_048_576} MiB`;
  if (error instanceof SyntaxError) return "the answer is not JSON";
  return "the answer lacks what sign-in needs";
}

/** A profile read: where, with which token, and how long it may take. */
interface ProfileCall {
  api: string;
  /** The origin of `api`: the namespace of the account ids it gives. */
  server: string;
  accessToken: string;
  timeoutMs: number;
}

class ProviderStatus extends Error {
  constructor(readonly status: number) {
    super(`HTTP ${status}`);
  }
}

async function getJson(call: ProfileCall, path: string): Promise<unknown> {
  const response = await fetch(`${call.api}${path}`, {
    headers: { authorization: `Bearer ${call.accessToken}`, accept: "application/json", "user-agent": "modelgate" },
    signal: AbortSignal.timeout(call.timeoutMs),
  });
  if (!response.ok) throw new ProviderStatus(response.status);
  const text = await responseText(response, PROFILE_MAX_BYTES);
  if (text === null) throw new RangeError("profile answer too large");
  return JSON.parse(text);
}

async function githubProfile(call: ProfileCall): Promise<OAuthProfile> {
  const user = (await getJson(call, "/user")) as { id?: unknown };
  if (typeof user?.id !== "number" && typeof user?.id !== "string") throw new Error("no user id");
  const emails = await getJson(call, "/user/emails");
  const list = Array.isArray(emails) ? (emails as Array<{ email?: unknown; primary?: unknown; verified?: unknown }>) : [];
  const verified = list.filter((e) => e.verified === true && typeof e.email === "string");
  const chosen = verified.find((e) => e.primary === true) ?? verified[0];
  return {
    provider: "github",
    server: call.server,
    providerUserId: String(user.id),
    email: chosen ? String(chosen.email) : null,
    emailVerified: chosen !== undefined,
  };
}

async function googleProfile(call: ProfileCall): Promise<OAuthProfile> {
  const info = (await getJson(call, "/userinfo")) as { sub?: unknown; email?: unknown; email_verified?: unknown };
  if (typeof info?.sub !== "string" || info.sub === "") throw new Error("no subject");
  const email = typeof info.email === "string" ? info.email : null;
  return {
    provider: "google",
    server: call.server,
    providerUserId: info.sub,
    email,
    emailVerified: email !== null && (info.email_verified === true || info.email_verified === "true"),
  };
}
