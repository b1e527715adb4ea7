/**
 * SpendAuth: pay per request with an EIP-712 authorization in `X-Payment-Signature`, no account.
 * createSpendAuth returns the Gate's hook; every denial is a GatewayError value. Checks, in order:
 *   1 parse  2 binding (operator, serviceId)  3 time  4 price (402 says how much)
 *   5 signature (EIP-712 recovery; with no rpc_url the signer must be in allowed_signers)
 *   6 replay: (commitment, nonce) recorded atomically in the database, committed before the upstream
 *     is called (on Postgres the primary key decides between replicas); the records of one
 *     event-loop turn share one commit (../db/group-commit.ts); with
 *     `[cluster] redis_url`, in Redis too (./shared-nonces.ts), and Redis unreachable is a 503
 *   7 with rpc_url, the account: it exists and the signer is its spending key
 *   8 rate limit per commitment (after 7: a forged header cannot use up someone's limit)
 *   9 with rpc_url, the nonce is one the contract can take and the balance covers the amount
 *   (7 and 9: ./account.ts)
 * A free model's request skips 6 and settles nothing: its nonce stays the client's.
 * Recovery runs before the nonce is recorded, unlike the order: recording first would let
 * anyone burn a client's nonces with unsigned garbage, and recovery is cheap. The nonce is
 * released again when a later check refuses the request or nothing is served, so the client can
 * retry with the same authorization; a served one's settlement row is written before its answer
 * goes out, so after a crash its header is still a replay.
 */
import { ConfigError } from "../config/load";
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { GatewayError } from "../errors";
import type { SettlementWriter } from "./settlement-writer";
import type { AccountReader } from "./chain";
import type { Admission, AdmitInput, SpendAuthHook } from "../auth/types";
import { spendAdmission, spendAuthIdentity } from "./admission";
import { EXPIRY_SKEW_S, isParseFailure, parseSpendAuthHeader } from "./header";
import type { NonceStore, Recorded } from "./nonce-store";
import { createNonceStore } from "./nonces";
import type { SharedNonceClaim, SharedNonces } from "./shared-nonces";
import { groupPerTurn } from "../db/group-commit";
import { Reservations } from "./reservations";
import { checkBinding, checkTime, recoverSpendSigner, requiredAmount, spendDomain } from "./verify";
import { maxReservation, reserveWithin } from "../credits/reservation";
import { accountOf, invalidSpendAuth, spendRefusal } from "./account";

export const SPEND_AUTH_HEADER = "x-payment-signature";

/** Headers to add to the response, or the 429 to return (later, from a shared limiter). */
export type SpendRateLimit = (commitment: string) => Record<string, string> | GatewayError | Promise<Record<string, string> | GatewayError>;

export interface SpendAuthDeps {
  db: Db;
  config: Pick<Config, "spend_auth" | "routing">;
  now: () => number;
  /** The on-chain account check; required when spend_auth.rpc_url is set. */
  accounts?: AccountReader;
  rateLimit?: SpendRateLimit;
  nonces?: NonceStore;
  /** The replay records other replicas see too (`[cluster] redis_url`). */
  sharedNonces?: SharedNonces;
  reservations?: Reservations;
  /** Where served authorizations go; default: written at once (tests, the CLI). */
  settlements?: Pick<SettlementWriter, "push">;
}

export { spendAuthMode } from "./mode";
import { spendAuthMode } from "./mode";

export function createSpendAuth(deps: SpendAuthDeps): SpendAuthHook {
  const cfg = deps.config.spend_auth;
  const mode = spendAuthMode(deps.config);
  if (mode === "off") return async () => disabled();
  if (!cfg.operator) throw new ConfigError("spend_auth.operator: required when rpc_url or allowed_signers is set");
  if (!cfg.verifying_contract) throw new ConfigError("spend_auth.verifying_contract: required when rpc_url or allowed_signers is set");
  if (mode === "chain" && !deps.accounts) throw new Error("createSpendAuth: rpc_url is set but no account reader was given");
  const domain = spendDomain(cfg.chain_id, cfg.verifying_contract);
  const binding = { operator: cfg.operator, serviceId: cfg.service_id };
  const allowed = new Set(cfg.allowed_signers.map((a) => a.toLowerCase()));
  const unitsPerCredit = BigInt(cfg.units_per_credit);
  const nonces = deps.nonces ?? createNonceStore(deps.db);
  const releaseNonce = (claim: SharedNonceClaim): void => {
    void nonces.release(claim.commitment, claim.nonce, deps.now());
    deps.sharedNonces?.release(claim);
  };
  const record = groupPerTurn(nonces.recordAll);
  const reservations = deps.reservations ?? new Reservations();

  return async function admitSpendAuth(input: AdmitInput): Promise<Admission | GatewayError> {
    const header = input.request.headers.get(SPEND_AUTH_HEADER) ?? "";
    const auth = parseSpendAuthHeader(header);
    if (isParseFailure(auth)) return invalidSpendAuth(auth.field, auth.message);
    const bound = checkBinding(auth, binding);
    if (bound) return invalidSpendAuth(bound.field, bound.message);
    const nowMs = deps.now();
    const timely = checkTime(auth, { nowMs, maxExpiryS: cfg.max_expiry_s });
    if (timely) return invalidSpendAuth(timely.field, timely.message);
    const maxCost = input.route.free
      ? 0
      : maxReservation(input.reserve ?? reserveWithin, {
          price: input.route.price,
          body: input.body,
          bodyBytes: input.bodyBytes,
          defaultMaxTokens: deps.config.routing.default_max_tokens,
        });
    const required = requiredAmount(maxCost, unitsPerCredit);
    if (auth.amount < required) return paymentRequired(required, auth.amount, cfg);
    const signer = await recoverSpendSigner(auth, domain);
    if (typeof signer !== "string") return invalidSpendAuth(signer.field, signer.message);
    if (mode === "allowlist" && !allowed.has(signer)) {
      return invalidSpendAuth("signature", `signer ${signer} is not in spend_auth.allowed_signers`);
    }

    const commitment = auth.commitment;
    // A free model costs nothing: the header only proves the caller. Its nonce is not used up, so
    // nothing waits on-chain for an authorization that could never be claimed.
    if (required === 0n) return admitFree(commitment, signer);
    const nonce = auth.nonce.toString();
    const keepUntilMs = Number(auth.expiry + EXPIRY_SKEW_S) * 1000;
    let recorded: Recorded | null;
    try {
      recorded = await record({ commitment, nonce, keepUntilMs });
    } catch {
      return new GatewayError("service_unavailable", "This authorization cannot be recorded right now (the database is busy); send it again shortly", {
        headers: { "retry-after": "1" },
      });
    }
    const replay = (): GatewayError =>
      new GatewayError("nonce_replay", `nonce ${nonce} of commitment ${commitment} was already used; sign a new authorization with a fresh nonce`, {
        param: "nonce",
      });
    if (recorded === null) return replay();
    const claim = { commitment, nonce, keepUntilMs, replacing: recorded === "replacing" };
    if (deps.sharedNonces) {
      const claimed = await deps.sharedNonces.claim(claim).catch(() => null);
      if (claimed !== true) {
        void nonces.release(commitment, nonce, deps.now());
        return claimed === false
          ? replay()
          : new GatewayError(
              "service_unavailable",
              "This authorization cannot be recorded right now (Redis, where replicas share replay records, cannot be reached); send it again shortly",
              { headers: { "retry-after": "1" } },
            );
      }
    }
    // Reserved before the account is read, in the same synchronous step as reading what others
    // reserved: concurrent requests on one commitment each see the ones admitted before them, where
    // reserving after the account read would let all of them read 0 reserved and overspend it.
    const reserved = reservations.total(commitment, nowMs);
    reservations.add(commitment, nonce, auth.amount, Number(auth.expiry));
    const undo = (refusal: GatewayError): GatewayError => {
      reservations.remove(commitment, nonce);
      releaseNonce(claim);
      return refusal;
    };
    const account = mode === "chain" ? await accountOf(deps.accounts!, commitment, signer) : null;
    if (account instanceof GatewayError) return undo(account);
    // Once the signer is known to be the account's: a forged header naming someone's commitment
    // must not use up that commitment's limit.
    const limited = (await deps.rateLimit?.(commitment)) ?? {};
    if (limited instanceof GatewayError) return undo(limited);
    const refused = account && spendRefusal(account, auth, reserved, reservations);
    if (refused) {
      refused.options.headers = { ...limited, ...refused.options.headers };
      return undo(refused);
    }
    return spendAdmission(deps, auth, {
      release: () => releaseNonce(claim),
      reservations,
      requestId: input.requestId,
      headers: limited,
      replacing: claim.replacing,
    });
  };

  /** A free model's request: the caller proven as above (and on-chain), limited per commitment; nothing recorded, reserved or settled. */
  async function admitFree(commitment: `0x${string}`, signer: string): Promise<Admission | GatewayError> {
    if (mode === "chain") {
      const account = await accountOf(deps.accounts!, commitment, signer);
      if (account instanceof GatewayError) return account;
    }
    const limited = (await deps.rateLimit?.(commitment)) ?? {};
    if (limited instanceof GatewayError) return limited;
    return { identity: spendAuthIdentity(commitment), headers: limited, settle() {} };
  }
}

function disabled(): GatewayError {
  return new GatewayError(
    "spend_auth_disabled",
    "SpendAuth payments are not enabled on this gateway (it has neither spend_auth.rpc_url nor spend_auth.allowed_signers); use an API key instead",
  );
}

function paymentRequired(required: bigint, offered: bigint, cfg: Config["spend_auth"]): GatewayError {
  return new GatewayError(
    "payment_required",
    `The authorized amount ${offered} does not cover this request's maximum cost of ${required}; sign again with amount >= ${required}`,
    {
      param: "amount",
      extra: { required_amount: required.toString() },
      headers: {
        "x-payment-required": required.toString(),
        "x-payment-required-operator": cfg.operator!.toLowerCase(),
        "x-payment-required-service-id": String(cfg.service_id),
        "x-payment-required-chain-id": String(cfg.chain_id),
        "x-payment-required-contract": cfg.verifying_contract!.toLowerCase(),
      },
    },
  );
}
