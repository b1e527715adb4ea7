/**
 * Parsing of the `X-Payment-Signature` header into a typed SpendAuthorization. The header is JSON
 * or hex-encoded JSON; every field must be present and well-formed for its Solidity type
 * (bytes32, uint64, uint8, uint256, address, 65-byte signature). Unsigned integers may be JSON
 * numbers (safe integers only), decimal strings or 0x-hex strings. Nothing here touches state:
 * the result is a value or a ParseFailure naming the field.
 */

/**
 * How long a replay record is kept past an authorization's expiry (clock skew between client and
 * gateway). Here, not beside the checks that use viem, so that the settlement queue, which the
 * CLI loads for every command and `serve`, reads it without loading viem (2 MB more at every start).
 */
export const EXPIRY_SKEW_S = 30n;
/** An authorization must leave at least this long before its expiry to settle it on-chain. */
export const SETTLE_MARGIN_S = 30n;

export interface SpendAuthorization {
  /** bytes32, lower-case 0x-hex. */
  commitment: `0x${string}`;
  serviceId: bigint;
  jobIndex: number;
  amount: bigint;
  /** address, lower-case 0x-hex. */
  operator: `0x${string}`;
  nonce: bigint;
  /** Unix seconds. */
  expiry: bigint;
  /** 65 bytes, lower-case 0x-hex, v normalised to 27/28. */
  signature: `0x${string}`;
}

export interface ParseFailure {
  field: string;
  message: string;
}

/** Header values longer than this are refused before any parsing (a real one is ~600 bytes). */
const MAX_HEADER_LENGTH = 8192;

const MAX_UINT = { uint8: (1n << 8n) - 1n, uint64: (1n << 64n) - 1n, uint256: (1n << 256n) - 1n } as const;
const HEX = /^0x[0-9a-fA-F]*$/;
const DECIMAL = /^[0-9]{1,78}$/;

export function parseSpendAuthHeader(value: string): SpendAuthorization | ParseFailure {
  if (value.length > MAX_HEADER_LENGTH) return fail("X-Payment-Signature", `is longer than ${MAX_HEADER_LENGTH} characters`);
  const raw = decodeHeader(value.trim());
  if (raw === null) return fail("X-Payment-Signature", "must be a JSON object or hex-encoded JSON");
  const commitment = parseFixedHex(raw.commitment, 32);
  if (commitment === null) return fail("commitment", "must be a 0x-prefixed 32-byte hex string (bytes32)");
  const serviceId = parseUint(raw.serviceId, "uint64");
  if (serviceId === null) return fail("serviceId", "must be an unsigned 64-bit integer (number or digit string)");
  const jobIndex = parseUint(raw.jobIndex, "uint8");
  if (jobIndex === null) return fail("jobIndex", "must be an integer from 0 to 255");
  const amount = parseUint(raw.amount, "uint256");
  if (amount === null) return fail("amount", "must be an unsigned 256-bit integer (digit string)");
  const operator = parseFixedHex(raw.operator, 20);
  if (operator === null) return fail("operator", "must be a 0x-prefixed 20-byte hex address");
  const nonce = parseUint(raw.nonce, "uint256");
  if (nonce === null) return fail("nonce", "must be an unsigned 256-bit integer (number or digit string)");
  const expiry = parseUint(raw.expiry, "uint64");
  if (expiry === null) return fail("expiry", "must be a Unix time in seconds (unsigned 64-bit integer)");
  const signature = parseSignatureHex(raw.signature);
  if (signature === null) return fail("signature", "must be a 0x-prefixed 65-byte hex signature (r, s, v with v 27 or 28)");
  return { commitment, serviceId, jobIndex: Number(jobIndex), amount, operator, nonce, expiry, signature };
}

export function isParseFailure(value: SpendAuthorization | ParseFailure): value is ParseFailure {
  return "field" in value;
}

/** The authorization as JSON with every integer a decimal string (what the settlement queue stores). */
export function authorizationToJson(auth: SpendAuthorization): string {
  return JSON.stringify({
    commitment: auth.commitment,
    serviceId: auth.serviceId.toString(),
    jobIndex: auth.jobIndex,
    amount: auth.amount.toString(),
    operator: auth.operator,
    nonce: auth.nonce.toString(),
    expiry: auth.expiry.toString(),
    signature: auth.signature,
  });
}

function decodeHeader(value: string): Record<string, unknown> | null {
  let text = value;
  if (!value.startsWith("{")) {
    const hex = value.startsWith("0x") || value.startsWith("0X") ? value.slice(2) : value;
    if (hex.length === 0 || hex.length % 2 !== 0 || !/^[0-9a-fA-F]+$/.test(hex)) return null;
    text = Buffer.from(hex, "hex").toString("utf8");
  }
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function parseFixedHex(value: unknown, bytes: number): `0x${string}` | null {
  if (typeof value !== "string" || value.length !== 2 + bytes * 2 || !HEX.test(value)) return null;
  return value.toLowerCase() as `0x${string}`;
}

function parseUint(value: unknown, type: keyof typeof MAX_UINT): bigint | null {
  let parsed: bigint;
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) return null;
    parsed = BigInt(value);
  } else if (typeof value === "string" && DECIMAL.test(value)) {
    parsed = BigInt(value);
  } else if (typeof value === "string" && value.length > 2 && value.length <= 66 && HEX.test(value)) {
    parsed = BigInt(value);
  } else {
    return null;
  }
  return parsed <= MAX_UINT[type] ? parsed : null;
}

/** Accepts v as 27/28 or as the y-parity 0/1 (normalised to 27/28, which is what ecrecover takes). */
function parseSignatureHex(value: unknown): `0x${string}` | null {
  const hex = parseFixedHex(value, 65);
  if (hex === null) return null;
  const v = Number.parseInt(hex.slice(130), 16);
  if (v === 27 || v === 28) return hex;
  if (v === 0 || v === 1) return `${hex.slice(0, 130)}${(v + 27).toString(16)}` as `0x${string}`;
  return null;
}

function fail(field: string, message: string): ParseFailure {
  return { field, message };
}
