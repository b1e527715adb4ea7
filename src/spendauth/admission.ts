/**
 * The Admission of a SpendAuth authorization that passed every check (./admit.ts): it must be
 * answered by the authorization's expiry less SETTLE_MARGIN_S, and is settled once. A delivered
 * answer (or one a later nonce of the commitment waits behind) writes its settlement row, claimed
 * on chain by ./worker.ts; anything else gives the reservation and the nonce back to the client.
 * A failure to write is logged, never thrown: the answer has gone out.
 */
import { log } from "../log";
import type { Db } from "../db/client";
import type { Admission, Identity } from "../auth/types";
import { enqueueSettlement } from "./settlements";
import type { SettlementWriter } from "./settlement-writer";
import { SETTLE_MARGIN_S, type SpendAuthorization } from "./header";
import type { Reservations } from "./reservations";

interface AdmissionDeps {
  db: Db;
  now: () => number;
  /** Where served authorizations go; default: written at once (tests, the CLI). */
  settlements?: Pick<SettlementWriter, "push">;
}

/** A SpendAuth caller: no account, limited and recorded per commitment. */
export function spendAuthIdentity(commitment: string): Identity {
  return { kind: "spend_auth", userId: null, keyId: null, subject: commitment };
}

export function spendAdmission(
  deps: AdmissionDeps,
  auth: SpendAuthorization,
  ctx: { release: () => void; reservations: Reservations; requestId: string; headers: Record<string, string>; replacing: boolean },
): Admission {
  const nonce = auth.nonce.toString();
  let settled = false;
  const failed = (err: unknown): void => {
    log("error", "spend_auth: settle failed", { request_id: ctx.requestId, error: String((err as Error)?.message ?? err) });
  };
  /** The settlement row written, or a promise of its commit (Postgres); never rejects. */
  const queue = (): Promise<void> | undefined => {
    try {
      const written = deps.settlements
        ? deps.settlements.push({ auth, requestId: ctx.requestId, at: deps.now() })
        : enqueueSettlement(deps.db, auth, ctx.requestId, deps.now());
      return written?.catch(failed);
    } catch (err) {
      failed(err);
      return undefined;
    }
  };
  return {
    identity: spendAuthIdentity(auth.commitment),
    headers: ctx.headers,
    // The claim must reach the chain before the authorization expires: an upstream that has not
    // answered by then is given up (the nonce goes back to the client), and one that has is
    // claimed at once, not when a long answer ends (then it would have expired: served, unpaid).
    answerBy: Number(auth.expiry - SETTLE_MARGIN_S) * 1000,
    answered() {
      if (settled) return;
      settled = true;
      return queue();
    },
    settle(outcome) {
      if (settled) return;
      settled = true;
      const delivered = outcome.status < 400 || (outcome.usage?.completion_tokens ?? 0) > 0;
      try {
        // The contract takes nonces in order: one released while a later one of the commitment is
        // held (served, or still in flight) would leave that one unclaimable. It is settled
        // instead: the client signed it, and chose to send the next before this one ended. Not so
        // a replacement of a dead one: the later ones already waited on this nonce before it.
        if (delivered || (!ctx.replacing && ctx.reservations.holdsAfter(auth.commitment, auth.nonce))) return queue();
        ctx.reservations.remove(auth.commitment, nonce);
        ctx.release();
      } catch (err) {
        failed(err);
      }
    },
  };
}
