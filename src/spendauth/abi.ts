/**
 * The part of the ShieldedCredits contract interface modelgate calls: the account view for the
 * on-chain check, authorizeSpend + claimPayment for settlement, getSpendAuth to find out what a
 * lost receipt did, and the contract's custom errors. Signatures match the published ShieldedCredits
 * contract.
 */
import { encodeAbiParameters, keccak256, parseAbi } from "viem";

export const SHIELDED_CREDITS_ABI = parseAbi([
  "struct CreditAccountView { address spendingKey; address token; uint256 balance; uint256 totalFunded; uint256 totalSpent; uint256 nonce; }",
  "struct SpendAuth { bytes32 commitment; uint64 serviceId; uint8 jobIndex; uint256 amount; address operator; uint256 nonce; uint64 expiry; bytes signature; }",
  "function getAccount(bytes32 commitment) view returns (CreditAccountView)",
  "function getSpendAuth(bytes32 authHash) view returns (uint256 amount, address token, address operator, uint64 expiry, bool claimed)",
  "function authorizeSpend(SpendAuth auth) returns (bytes32 authHash)",
  "function claimPayment(bytes32 authHash, address recipient)",
  "function fundCredits(address token, uint256 amount, bytes32 commitment, address spendingKey)",
  // The contract's errors, so a revert is decoded by name (a settlement's last_error says why).
  "error InsufficientCredits(uint256 available, uint256 requested)",
  "error InvalidSignature()",
  "error SpendingKeyMismatch(address expected, address provided)",
  "error TokenMismatch(address expected, address provided)",
  "error OperatorRequired()",
  "error AccountNotFound(bytes32 commitment)",
  "error SpendExpired(uint64 expiry, uint256 currentTime)",
  "error InvalidNonce(uint256 expected, uint256 provided)",
  "error AuthNotFound(bytes32 authHash)",
  "error AlreadyClaimed(bytes32 authHash)",
  "error NotDesignatedOperator(address expected, address caller)",
  "error TransferFailed()",
]);

/** The contract's key for a spend: keccak256(abi.encode(commitment, serviceId, jobIndex, nonce)). */
export function spendAuthHash(auth: { commitment: `0x${string}`; serviceId: bigint; jobIndex: number; nonce: bigint }): `0x${string}` {
  return keccak256(
    encodeAbiParameters(
      [{ type: "bytes32" }, { type: "uint64" }, { type: "uint8" }, { type: "uint256" }],
      [auth.commitment, auth.serviceId, auth.jobIndex, auth.nonce],
    ),
  );
}
