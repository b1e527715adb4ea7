/**
 * Passwords: what a password must be, and argon2id hashing through Bun.password (only the hash is
 * stored). A check for an account that does not exist still costs one verification, so the time
 * an answer takes does not tell whether the account exists.
 */

export const PASSWORD_MIN = 8;
/** argon2 hashes whatever it is given; a bound keeps one request from costing seconds. */
export const PASSWORD_MAX = 256;
const ARGON2 = { algorithm: "argon2id", memoryCost: 19_456, timeCost: 2 } as const;
/** Verified against when the user does not exist, so the timing does not tell. */
let dummyHash: Promise<string> | null = null;

export function passwordProblem(password: unknown): string | null {
  if (password === undefined || password === null) return "a password is required";
  if (typeof password !== "string") return "the password must be a string of characters";
  // A lone UTF-16 surrogate (only JSON's \ud800 escapes make one) is hashed as U+FFFD, so every
  // such password would match every other of the same length.
  if (!password.isWellFormed()) return "the password holds an unpaired surrogate (\\ud800-\\udfff), which is not a character";
  const characters = [...password].length; // code points: an emoji is one character, not two
  if (characters < PASSWORD_MIN) return `the password must be at least ${PASSWORD_MIN} characters`;
  if (characters > PASSWORD_MAX) return `the password must be at most ${PASSWORD_MAX} characters`;
  return null;
}

export function hashPassword(password: string): Promise<string> {
  return Bun.password.hash(password, ARGON2);
}

/** Whether the password matches the stored hash (a malformed hash matches nothing). */
export function passwordMatches(password: string, hash: string): Promise<boolean> {
  return Bun.password.verify(password, hash).catch(() => false);
}

/** Costs what one verification costs and matches nothing: for an account that does not exist or has no password. */
export async function verifyAgainstNothing(password: string): Promise<void> {
  dummyHash ??= hashPassword("modelgate timing equaliser");
  await passwordMatches(password, await dummyHash);
}
