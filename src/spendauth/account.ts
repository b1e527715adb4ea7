/**
 * SpendAuth's on-chain account check (with `spend_auth.rpc_url`): the commitment has a funded
 * ShieldedCredits account, the signer is its spending key, the nonce is one the contract can take,
 * and the balance this gateway has not already promised covers the amount. Every denial is a
 * GatewayError value; the chain being unreachable is a 502.
 */
import { GatewayError } from "../errors";
import type { AccountReader, ChainAccount } from "./chain";
import type { SpendAuthorization } from "./header";
import type { Reservations } from "./reservations";

/** The account behind `commitment`, once its spending key is known to be `signer`. */
export async function accountOf(accounts: AccountReader, commitment: `0x${string}`, signer: string): Promise<ChainAccount | GatewayError> {
  let account: ChainAccount;
  try {
    account = await accounts.getAccount(commitment);
  } catch {
    return new GatewayError("chain_unavailable", "The chain could not be asked about this credit account; try again shortly");
  }
  if (/^0x0{40}$/.test(account.spendingKey)) return invalidSpendAuth("commitment", "has no funded credit account on the ShieldedCredits contract");
  if (account.spendingKey !== signer) return invalidSpendAuth("signature", `signer ${signer} is not the spending key of this credit account`);
  return account;
}

/**
 * A paid authorization against its account: `reserved` is what this gateway already promised from
 * it (unsettled authorizations), `reservations` holds their nonces.
 */
export function spendRefusal(account: ChainAccount, auth: SpendAuthorization, reserved: bigint, reservations: Reservations): GatewayError | null {
  if (auth.nonce < account.nonce) {
    return new GatewayError("nonce_replay", `nonce ${auth.nonce} is below the account's on-chain nonce ${account.nonce}; it was already spent`, {
      param: "nonce",
    });
  }
  // The contract takes an account's nonces strictly in order: a later one than the next it can
  // take (after this gateway's own unsettled authorizations) could never be claimed.
  const next = reservations.nextFree(auth.commitment, account.nonce);
  if (auth.nonce > next) {
    return invalidSpendAuth(
      "nonce",
      `${auth.nonce} skips ahead: the contract takes nonces in order, and the next it can take for this account (its on-chain nonce, after this gateway's unsettled authorizations) is ${next}`,
    );
  }
  const available = account.balance > reserved ? account.balance - reserved : 0n;
  if (available < auth.amount) {
    return new GatewayError(
      "insufficient_balance",
      `The credit account's balance available to this gateway (${available}) does not cover the amount ${auth.amount}`,
      { param: "amount", extra: { available: available.toString() } },
    );
  }
  return null;
}

export function invalidSpendAuth(field: string, message: string): GatewayError {
  const param = field === "X-Payment-Signature" ? null : field;
  return new GatewayError("invalid_spend_auth", `Invalid X-Payment-Signature: ${field} ${message}`, { param });
}
