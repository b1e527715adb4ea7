/**
 * The pure checks of a SpendAuthorization: binding to this gateway, time, price and EIP-712
 * signature recovery. The EIP-712 domain and type are those of the ShieldedCredits contract, so
 * an authorization this gateway accepts is one the contract's authorizeSpend also accepts.
 * chainId and verifyingContract always come from the config, never from the header.
 */
import { recoverTypedDataAddress } from "viem";
import { SETTLE_MARGIN_S, type SpendAuthorization } from "./header";

export const SPEND_AUTH_TYPES = {
  SpendAuthorization: [
    { name: "commitment", type: "bytes32" },
    { name: "serviceId", type: "uint64" },
    { name: "jobIndex", type: "uint8" },
    { name: "amount", type: "uint256" },
    { name: "operator", type: "address" },
    { name: "nonce", type: "uint256" },
    { name: "expiry", type: "uint64" },
  ],
} as const;

export interface SpendDomain {
  name: "ShieldedCredits";
  version: "1";
  chainId: number;
  verifyingContract: `0x${string}`;
}

export function spendDomain(chainId: number, verifyingContract: string): SpendDomain {
  return { name: "ShieldedCredits", version: "1", chainId, verifyingContract: verifyingContract.toLowerCase() as `0x${string}` };
}

export interface CheckFailure {
  field: string;
  message: string;
}

export function checkBinding(auth: SpendAuthorization, binding: { operator: string; serviceId: number }): CheckFailure | null {
  if (auth.operator !== binding.operator.toLowerCase()) {
    return { field: "operator", message: `names operator ${auth.operator}, but this gateway is operator ${binding.operator.toLowerCase()}` };
  }
  if (auth.serviceId !== BigInt(binding.serviceId)) {
    return { field: "serviceId", message: `is ${auth.serviceId}, but this gateway serves service ${binding.serviceId}` };
  }
  return null;
}

export function checkTime(auth: SpendAuthorization, options: { nowMs: number; maxExpiryS: number }): CheckFailure | null {
  const nowS = BigInt(Math.floor(options.nowMs / 1000));
  // The contract refuses to settle past expiry: one that ends sooner than the settling time is
  // refused here, or a signature alone would buy a request that can never be paid.
  if (auth.expiry < nowS + SETTLE_MARGIN_S) {
    return {
      field: "expiry",
      message: `is ${auth.expiry} (now ${nowS}): it must be at least ${SETTLE_MARGIN_S} s ahead so the payment can be settled; sign a new authorization`,
    };
  }
  if (auth.expiry > nowS + BigInt(options.maxExpiryS)) {
    return { field: "expiry", message: `is more than ${options.maxExpiryS} s in the future; sign a shorter-lived authorization` };
  }
  return null;
}

/** A maximum cost in micro-credits (../credits/price.ts) in the contract's amount units, rounded up. */
export function requiredAmount(micro: number, unitsPerCredit: bigint): bigint {
  if (micro <= 0) return 0n;
  return (BigInt(micro) * unitsPerCredit + 999_999n) / 1_000_000n;
}

const SECP256K1_HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

/**
 * The address that signed `auth` under `domain`, or a failure. High-s signatures are refused, as
 * the contract's ECDSA.recover refuses them (they would never settle).
 */
export async function recoverSpendSigner(auth: SpendAuthorization, domain: SpendDomain): Promise<`0x${string}` | CheckFailure> {
  const s = BigInt(`0x${auth.signature.slice(66, 130)}`);
  if (s > SECP256K1_HALF_N || s === 0n) return { field: "signature", message: "has a non-canonical s value" };
  try {
    const signer = await recoverTypedDataAddress({
      domain,
      types: SPEND_AUTH_TYPES,
      primaryType: "SpendAuthorization",
      message: {
        commitment: auth.commitment,
        serviceId: auth.serviceId,
        jobIndex: auth.jobIndex,
        amount: auth.amount,
        operator: auth.operator,
        nonce: auth.nonce,
        expiry: auth.expiry,
      },
      signature: auth.signature,
    });
    return signer.toLowerCase() as `0x${string}`;
  } catch {
    return { field: "signature", message: "does not recover to any signer" };
  }
}
