/**
 * The Gate every /v1/chat/completions request passes (src/auth/types.ts). Identities are checked
 * in DESIGN.md's order, and a presented but invalid credential is a 401, never anonymous:
 *   1. X-Payment-Signature -> the SpendAuth hook (or 401 spend_auth_disabled without one)
 *   2. Authorization       -> API key (`Bearer sk-mg-...`), limited per key; without it,
 *      X-Api-Key              -> the same API key as Anthropic's clients send it (`sk-mg-...`)
 *   3. mg_session cookie   -> session, limited per user; Origin checked
 *   4. nothing             -> anonymous: free models only, limited per client address
 * Then the rate limit (./rate-policies.ts; x-ratelimit-* headers on every answer, denials too; a
 * shared limiter's answers judged in ./shared-limits.ts), then, for API key and session callers on
 * non-free models, credits (./paid-admission.ts; free models are never debited). Whether a key or
 * session is valid: ./credential-checks.ts.
 * A request refused before admission (a bad body, an unknown model) is first asked
 * credentialRefusal(): an invalid credential is a 401 whatever else is wrong, as OpenAI answers.
 * SpendAuth is judged only at admission (its checks need the body and the chain). Admission makes
 * no writes: a key's row is in memory after its first use (./key-verifier.ts), a session's row
 * with its balance is one read, and a paid request's debit is written once it ends (../credits/meter.ts).
 */
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { GatewayError } from "../errors";
import type { RateDecision, RateLimiter, RatePolicy } from "../ratelimit/types";
import { limitsUnavailable, rateLimitHeaders } from "../ratelimit/types";
import { createRatePolicies } from "./rate-policies";
import type { CreditMeter } from "../credits/meter";
import type { Admission, AdmitInput, Gate, Identity, ReadInput, SettleInput, SpendAuthHook } from "./types";
import { createKeyVerifier } from "./key-verifier";
import type { KeyVerifier } from "./key-check";
import { createKeyLimits, type TakenLimits } from "./key-limits";
import { judgeSharedLimits, requestLimitDenial } from "./shared-limits";
import type { VerifiedKey } from "./apikey";
import type { ModelRoute } from "../router/registry";
import { addressSubject } from "../client-address";
import { createSessionValidator, type SessionUser } from "./session";
import { createCredentialChecks } from "./credential-checks";
import { createPaidAdmission } from "./paid-admission";
import { presented } from "./presented";
import { findUserByEmail } from "./users";

export interface GateDeps {
  db: Db;
  config: Config;
  now: () => number;
  limiter: RateLimiter;
  meter: CreditMeter;
  lastUsed: { touch(keyId: string): void };
  /** Verifies X-Payment-Signature (src/spendauth/admit.ts); absent when SpendAuth is off. */
  spendAuth?: SpendAuthHook;
  /** The key check, made here when absent; a server hands every config's gate the same one (it polls the database). */
  keys?: KeyVerifier;
}

function allowedModels(check: VerifiedKey | GatewayError): ((route: ModelRoute) => boolean) | null {
  return check instanceof GatewayError ? null : (check.policy?.allowsModel ?? null);
}

function spendAuthDisabled(): GatewayError {
  return new GatewayError("spend_auth_disabled", "SpendAuth is not configured on this gateway");
}

export function createGate(deps: GateDeps): Gate {
  const { config, limiter, meter } = deps;
  const keys = deps.keys ?? createKeyVerifier(deps.db, deps.now);
  const keyLimits = createKeyLimits({ config, limiter, meter, keys, now: deps.now });
  const validateSession = createSessionValidator(deps.db, { now: deps.now, durationMs: config.auth.session_days * 86_400_000 });
  const { verifyKey, verifySession } = createCredentialChecks({ keys, validateSession, server: config.server });
  const admitPaid = createPaidAdmission({ config, now: deps.now, limiter, meter, keys, keyLimits });
  const policies = createRatePolicies(config.limits);
  /**
   * A request the gateway answered without trying any upstream, because every upstream of the
   * model is cooling down (503), gives its request back: a client that follows its Retry-After
   * through an outage keeps its limit, the anonymous daily window included. Attempts that reached
   * an upstream count, whatever it answered: a client must not get unlimited tries at inputs that
   * make an upstream fail.
   */
  const givingBackUnserved =
    (subject: string, policy: RatePolicy, taken: TakenLimits | null = null) =>
    (outcome: SettleInput): void => {
      if (outcome.upstream === null && outcome.status === 503) {
        limiter.giveBack(subject, policy);
        taken?.giveBack();
      }
      taken?.charge(outcome.usage);
    };
  const ways = deps.spendAuth
    ? "an API key (Authorization: Bearer sk-mg-...), a dashboard session, or a SpendAuth payment (X-Payment-Signature)"
    : "an API key (Authorization: Bearer sk-mg-...) or a dashboard session";

  /**
   * `input`: the call, null for a read (no model, no credits); `knownBalance`: the stored balance when
   * already read (sessions), null to read it if a paid model needs it; `key`: an API key's, whose
   * policy applies (./key-limits.ts).
   */
  function admitIdentified(
    input: AdmitInput | null,
    identity: Identity,
    policy: RatePolicy,
    knownBalance: number | null,
    who: string,
    key?: VerifiedKey,
  ): Admission | GatewayError | Promise<Admission | GatewayError> {
    const decided = limiter.take(identity.subject, policy);
    if (decided instanceof Promise) {
      const ceilingHeaders: Record<string, string> = {};
      const ceilings = key === undefined ? null : keyLimits.take(key, ceilingHeaders);
      return judgeSharedLimits({ identity, who, decided, ceilings, ceilingHeaders, giveBackOwn: () => limiter.giveBack(identity.subject, policy) }).then(
        (judged) => (judged instanceof GatewayError ? judged : admitLimited(input, identity, policy, knownBalance, judged.headers, judged.taken, key)),
      );
    }
    const headers = rateLimitHeaders(decided);
    if (!decided.allowed) return requestLimitDenial(identity, decided, headers, who);
    const taken = key === undefined ? null : keyLimits.take(key, headers);
    if (taken instanceof GatewayError) {
      limiter.giveBack(identity.subject, policy);
      return taken;
    }
    // A limiter that answered the key's own limit at once answered its ceilings so too.
    return admitLimited(input, identity, policy, knownBalance, headers, taken as TakenLimits | null, key);
  }

  function admitLimited(
    input: AdmitInput | null,
    identity: Identity,
    policy: RatePolicy,
    knownBalance: number | null,
    headers: Record<string, string>,
    taken: TakenLimits | null,
    key?: VerifiedKey,
  ): Admission | GatewayError | Promise<Admission | GatewayError> {
    const giveBack = givingBackUnserved(identity.subject, policy, taken);
    if (input === null || input.route.free) return { identity, headers, settle: giveBack };
    return admitPaid({ input, identity, policy, knownBalance, headers, taken, key, giveBack });
  }

  /** `call`: the model call, null for a read (admitRead), which names no model and holds no credits. */
  function admitKey(input: ReadInput, authorization: string, call: AdmitInput | null): Admission | GatewayError | Promise<Admission | GatewayError> {
    const check = verifyKey(authorization);
    if (check instanceof Promise) return check.then((verified) => admitVerifiedKey(input, verified, call));
    return admitVerifiedKey(input, check, call);
  }

  function admitVerifiedKey(
    input: ReadInput,
    check: VerifiedKey | GatewayError,
    call: AdmitInput | null,
  ): Admission | GatewayError | Promise<Admission | GatewayError> {
    if (check instanceof GatewayError) return check;
    const { row } = check;
    deps.lastUsed.touch(row.id);
    const refusal = keyLimits.refusal(input, check, call?.route ?? null);
    if (refusal !== null) return refusal;
    return admitIdentified(call, check.identity, row.perMinute ? policies.forKey(row.perMinute) : policies.api_key, null, "this API key", check);
  }

  function admitSession(input: ReadInput, token: string, call: AdmitInput | null): Admission | GatewayError | Promise<Admission | GatewayError> {
    const session = verifySession(input.request, token);
    const admitted = (s: SessionUser | GatewayError): Admission | GatewayError | Promise<Admission | GatewayError> => {
      if (s instanceof GatewayError) return s;
      const identity: Identity = { kind: "session", userId: s.userId, keyId: null, subject: `user:${s.userId}` };
      return admitIdentified(call, identity, policies.session, s.balance, "this account's sessions");
    };
    return session instanceof Promise ? session.then(admitted) : admitted(session);
  }

  function admitAnonymous(input: AdmitInput): Admission | GatewayError | Promise<Admission | GatewayError> {
    if (!input.route.free) {
      return new GatewayError(
        "authentication_required",
        `The model "${input.route.id}" is not free: authenticate with ${ways}. Without credentials only free models may be used (GET /v1/models marks them "free": true)`,
      );
    }
    const identity: Identity = { kind: "anonymous", userId: null, keyId: null, subject: `ip:${addressSubject(input.clientIp())}` };
    const decided = limiter.take(identity.subject, policies.anonymous);
    if (decided instanceof Promise)
      return decided.then(
        (decision) => anonymousDecided(identity, decision),
        () => limitsUnavailable(),
      );
    return anonymousDecided(identity, decided);
  }

  function anonymousDecided(identity: Identity, decision: RateDecision): Admission | GatewayError {
    const headers = rateLimitHeaders(decision);
    if (!decision.allowed) {
      const per = decision.binding === "bucket" ? "minute" : "day";
      return new GatewayError(
        "rate_limit_exceeded",
        `Rate limit reached for anonymous callers from your address: ${decision.limit} requests per ${per}; retry after ${headers["retry-after"]} s, or authenticate with ${ways}`,
        { headers },
      );
    }
    return { identity, headers, settle: givingBackUnserved(identity.subject, policies.anonymous) };
  }

  /** A triage job's call (see Gate.admitInProcess): limited as the user's sessions, or as one API key for the service. */
  async function admitInProcess(input: AdmitInput, asUser: string | null): Promise<Admission | GatewayError> {
    if (asUser === null) {
      if (!input.route.free)
        return new GatewayError(
          "authentication_required",
          `The model "${input.route.id}" is not free: a job without as_user may use free models only; set as_user to call it as a user`,
        );
      const identity: Identity = { kind: "job", userId: null, keyId: null, subject: "service:jobs" };
      return admitIdentified(input, identity, policies.api_key, null, "the gateway's jobs");
    }
    const user = await findUserByEmail(deps.db, asUser);
    if (user === null || user.disabledAt !== null)
      return new GatewayError("invalid_api_key", `as_user "${asUser}" ${user === null ? "is no user of this gateway" : "is disabled"}`);
    const identity: Identity = { kind: "job", userId: user.id, keyId: null, subject: `user:${user.id}` };
    return admitIdentified(input, identity, policies.session, null, `${asUser}'s sessions and jobs`);
  }

  function admitRead(input: ReadInput): Admission | GatewayError | Promise<Admission | GatewayError> {
    const credential = presented(input.request);
    if (credential.kind === "api_key") return admitKey(input, credential.authorization, null);
    if (credential.kind === "session") return admitSession(input, credential.token, null);
    if (credential.kind === "spend_auth")
      return new GatewayError(
        "authentication_required",
        "A SpendAuth payment identifies a paid call, not a reader: send an API key or a session to read what is stored",
      );
    return new GatewayError(
      "authentication_required",
      `What the gateway stores belongs to the API key's or session's user that made it: authenticate with ${ways}`,
    );
  }

  return {
    admitInProcess,
    admitRead,
    credentialRefusal(request) {
      const credential = presented(request);
      let check: unknown = null;
      if (credential.kind === "spend_auth") check = deps.spendAuth ? null : spendAuthDisabled();
      else if (credential.kind === "api_key") check = verifyKey(credential.authorization);
      else if (credential.kind === "session") check = verifySession(request, credential.token);
      const refused = (c: unknown): GatewayError | null => (c instanceof GatewayError ? c : null);
      return check instanceof Promise ? check.then(refused) : refused(check);
    },
    modelFilter(request) {
      const credential = presented(request);
      if (credential.kind !== "api_key") return null;
      const check = verifyKey(credential.authorization);
      if (check instanceof Promise) return check.then(allowedModels);
      return allowedModels(check);
    },
    admit(input) {
      const credential = presented(input.request);
      if (credential.kind === "spend_auth") return deps.spendAuth ? deps.spendAuth(input) : spendAuthDisabled();
      if (credential.kind === "api_key") return admitKey(input, credential.authorization, input);
      if (credential.kind === "session") return admitSession(input, credential.token, input);
      return admitAnonymous(input);
    },
  };
}
