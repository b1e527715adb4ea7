/**
 * Whether a presented API key or session cookie is valid, as the gate asks it both to admit a
 * request and to answer credentialRefusal() and modelFilter() (./gate.ts). A refusal is a
 * GatewayError value; a check is synchronous when the answer is in memory (a cached key, a
 * session on SQLite) and a promise when it takes a round trip (Postgres).
 */
import type { Config } from "../config/schema";
import { GatewayError } from "../errors";
import type { KeyDenial, VerifiedKey } from "./apikey";
import type { KeyVerifier } from "./key-check";
import type { SessionCheck, SessionUser } from "./session";
import { bearerToken } from "./tokens";
import { originAllowed } from "./origin-policy";

export interface CredentialChecks {
  verifyKey(authorization: string): VerifiedKey | GatewayError | Promise<VerifiedKey | GatewayError>;
  /** Synchronous on SQLite; a promise on Postgres, whose session lookup is a round trip. */
  verifySession(request: Request, token: string): SessionUser | GatewayError | Promise<SessionUser | GatewayError>;
}

export interface CredentialCheckDeps {
  keys: KeyVerifier;
  validateSession: (token: string) => SessionCheck | Promise<SessionCheck>;
  /** Holds the gateway's own origin, which a session's request must come from (./origin-policy.ts); read at each check. */
  server: Pick<Config["server"], "public_url">;
}

function keyOrRefusal(check: VerifiedKey | KeyDenial): VerifiedKey | GatewayError {
  return check.ok ? check : new GatewayError("invalid_api_key", check.message);
}

export function createCredentialChecks(deps: CredentialCheckDeps): CredentialChecks {
  const { keys, validateSession } = deps;

  function sessionVerdict(request: Request, check: SessionCheck): SessionUser | GatewayError {
    if (!check.ok) return new GatewayError("invalid_session", check.message);
    if (!originAllowed(request, deps.server.public_url)) {
      return new GatewayError("forbidden", "Cross-origin requests made with a session cookie are refused");
    }
    return check.session;
  }

  return {
    verifyKey(authorization) {
      const token = bearerToken(authorization);
      if (token === null) {
        return new GatewayError("invalid_api_key", 'The Authorization header must be "Bearer sk-mg-..." with a modelgate API key');
      }
      const check = keys.verify(token);
      if (check instanceof Promise) return check.then(keyOrRefusal);
      return check.ok ? check : new GatewayError("invalid_api_key", check.message);
    },
    verifySession(request, token) {
      const check = validateSession(token);
      return check instanceof Promise ? check.then((c) => sessionVerdict(request, c)) : sessionVerdict(request, check);
    },
  };
}
