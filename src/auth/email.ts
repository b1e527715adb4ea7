/**
 * Email addresses in the one form they are stored in, so that lookups are exact and a lookalike
 * spelling is not a second account: NFKC, trimmed, lower-cased, NFKC again; each ASCII-encoded
 * domain label (`xn--…`) in its Unicode form. Also the configured sign-up domains in that form.
 */
import { domainToUnicode } from "node:url";
import type { Config } from "../config/schema";

/**
 * local@domain.tld without spaces, control characters, characters that show as nothing (format
 * characters, variation selectors, fillers: Unicode's default-ignorable code points, and the blank
 * braille pattern), any of which would make a second account that looks like the first, or a
 * second "@".
 */
const EMAIL = /^[^\s@\p{Cc}\p{Cf}\p{DI}\u2800]{1,64}@[^\s@\p{Cc}\p{Cf}\p{DI}\u2800]{1,253}\.[^\s@.\p{Cc}\p{Cf}\p{DI}\u2800]{1,63}$/u;

export function normalizeEmail(input: unknown): string | null {
  if (typeof input !== "string") return null;
  const folded = foldCase(input).trim();
  const at = folded.lastIndexOf("@");
  const email = at === -1 ? folded : folded.slice(0, at + 1) + unicodeLabels(folded.slice(at + 1));
  return email.length <= 320 && EMAIL.test(email) ? email : null;
}

/**
 * NFKC, lower-cased, then NFKC again: a fullwidth or otherwise compatible spelling is the same
 * address, not a lookalike second one; and lower-casing can leave a sequence that NFKC composes
 * (`T` + U+0308 becomes `t` + U+0308, which is `ẗ`), so without the second pass a normalized
 * address would not be its own normal form.
 */
function foldCase(text: string): string {
  return text.normalize("NFKC").toLowerCase().normalize("NFKC");
}

/**
 * A domain as emails are stored: case-folded, and each ASCII-encoded label (`xn--bcher-kva`) in
 * its Unicode form (`bücher`), as both name one domain. Only such labels are decoded, one at a
 * time (domainToUnicode on a whole domain would also cut it at `/` and drop invisible characters
 * that the address check must see); one that does not decode cleanly stays as it is.
 */
function normalizeDomain(domain: string): string {
  return unicodeLabels(foldCase(domain));
}

/** A case-folded domain with each `xn--` label decoded (see normalizeDomain). */
function unicodeLabels(folded: string): string {
  return folded.includes("xn--") ? folded.split(".").map(decodedLabel).join(".") : folded;
}

function decodedLabel(label: string): string {
  if (!/^xn--[a-z0-9-]+$/.test(label)) return label;
  const unicode = domainToUnicode(label);
  return unicode === "" || unicode.includes("\ufffd") || unicode.includes(".") || unicode.startsWith("xn--") ? label : foldCase(unicode);
}

/** `auth.allowed_domains` in the form the domains of stored emails take (an `@` in front is allowed). */
export function allowedDomains(auth: Pick<Config["auth"], "allowed_domains">): string[] {
  return auth.allowed_domains.map((d) => normalizeDomain(d.trim().replace(/^@/, "")));
}
