/**
 * The seam between the request pipeline and identities, credits and rate limits. The chat route
 * asks a Gate to admit a request before calling upstream and settles the admission afterwards
 * with the usage the upstream reported. Denials are values (a GatewayError), not exceptions.
 */
import { GatewayError, type ErrorCode } from "../errors";
import type { ModelRoute } from "../router/registry";
import type { Usage } from "../credits/cost";
import type { Reserve } from "../credits/reservation";
import type { IdentityKind } from "../identity-kind";

export interface Identity {
  kind: IdentityKind;
  userId: number | null;
  keyId: string | null;
  /** What the rate limiter counts against (key id, user id, commitment, client address). */
  subject: string;
}

/** A denial of a caller whose identity was established (rate limit, credits): logged and counted as that identity. */
export class IdentifiedDenial extends GatewayError {
  constructor(
    readonly identity: Identity,
    code: ErrorCode,
    message: string,
    options: GatewayError["options"] = {},
  ) {
    super(code, message, options);
  }
}

export interface AdmitInput {
  request: Request;
  /** The client address, resolved on demand: only anonymous callers need it. */
  clientIp: () => string;
  requestId: string;
  route: ModelRoute;
  /** The validated request body (an upload's: its model alone). */
  body: { model: string } & Record<string, unknown>;
  /** The body's size in bytes as received (the prompt estimate of ../credits/price.ts). */
  bodyBytes: number;
  /** How the call's credits are reserved, by its endpoint (../router/adapters/types.ts); chat's reserveWithin when absent. */
  reserve?: Reserve;
}

/** A read that calls no model: the request and its client address (for a key's address allowlist). */
export type ReadInput = Pick<AdmitInput, "request" | "clientIp">;

export interface SettleInput {
  usage: Usage | null;
  /** HTTP status the client saw (or the upstream status when streamed). */
  status: number;
  upstream: string | null;
  latencyMs: number;
}

export interface Admission {
  identity: Identity;
  /** Headers for the client response (x-ratelimit-*): a new object per request, which the caller completes. */
  headers: Record<string, string>;
  /**
   * Called exactly once per admitted request; must not throw and must not block. A promise
   * returned is the commit of what the request is charged: the answer's last byte waits for it.
   */
  settle(input: SettleInput): Promise<void> | void;
  /** The most this request may be charged (its credit reservation); absent when not reserved here. */
  reservedMicro?: number;
  /** The completion limit per choice the upstream must be sent, lower than the request's own (cut to the balance). */
  completionLimit?: number;
  /**
   * Epoch ms by which an upstream must have answered, when the identity sets one (a SpendAuth
   * authorization that must be settled before it expires); the first-byte timeout shortens to it.
   */
  answerBy?: number;
  /**
   * The upstream answered with success: the request will be served (SpendAuth writes its claim
   * now). A promise returned is that write's commit: the answer waits for it.
   */
  answered?(): Promise<void> | void;
}

/** Admits a request that presents `X-Payment-Signature`; SpendAuth (src/spendauth/admit.ts) makes it. */
export type SpendAuthHook = (input: AdmitInput) => Promise<Admission | GatewayError>;

export interface Gate {
  admit(input: AdmitInput): Promise<Admission | GatewayError> | Admission | GatewayError;
  /**
   * Admits a read that calls no model (GET /v1/responses/{id}) from a valid API key or session: the
   * key's address allowlist, and one request of the caller's rate limits, as a call; no credits.
   * Without a credential, or with SpendAuth (which pays per call and is no identity to look things
   * up with), the 401 `authentication_required`. Settled once, like a call's admission.
   */
  admitRead?(input: ReadInput): Promise<Admission | GatewayError> | Admission | GatewayError;
  /** For a request refused before admission: the 401 its presented credential earns, or null (valid, none, or SpendAuth). */
  credentialRefusal?(request: Request): GatewayError | null | Promise<GatewayError | null>;
  /**
   * Admits a call the gateway makes for itself, with no credential to present: as the user whose
   * email is `asUser` (their limits and credits, as their sessions), or with null as the built-in
   * service identity, which may use free models only.
   */
  admitInProcess?(input: AdmitInput, asUser: string | null): Promise<Admission | GatewayError> | Admission | GatewayError;
  /** Which models the request's credential may use, for GET /v1/models: null when every one (no valid key with an allowlist). */
  modelFilter?(request: Request): ((route: ModelRoute) => boolean) | null | Promise<((route: ModelRoute) => boolean) | null>;
}

/** Until identities exist: everyone is anonymous, nothing is limited or charged. */
export const openGate: Gate = {
  admit(input) {
    return {
      identity: { kind: "anonymous", userId: null, keyId: null, subject: input.clientIp() },
      headers: {},
      settle() {},
    };
  },
};
