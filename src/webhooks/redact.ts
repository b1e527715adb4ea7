/**
 * Secret values of the config taken out of text a job failure carries (a command's stderr, a
 * forward error naming a `forward = "env:…"` URL, a pull runner's reported error) before it is
 * logged, stored as `last_error` or shown by `jobs list` and the dashboard.
 */
export type Redact = (text: string, options?: { cutBefore?: boolean }) => string;

/**
 * Replaces each of `secrets` in a text with `[redacted]`, longest first (one may contain another).
 * With `cutBefore` (the text is the end of a longer one), a start that is the end of a secret
 * (what a cut through it left) goes too.
 */
export function secretRedactor(secrets: ReadonlySet<string>): Redact {
  const sorted = [...secrets].sort((a, b) => b.length - a.length);
  return (text, options = {}) => {
    if (options.cutBefore) text = text.slice(cutSecretLength(text, sorted));
    for (const secret of sorted) text = text.replaceAll(secret, "[redacted]");
    return text;
  };
}

/** The length of the longest end of a secret that `text` starts with (0 for none). */
function cutSecretLength(text: string, secrets: readonly string[]): number {
  let longest = 0;
  for (const secret of secrets) {
    for (let k = Math.min(secret.length - 1, text.length); k > longest; k--) {
      if (text.startsWith(secret.slice(-k))) {
        longest = k;
        break;
      }
    }
  }
  return longest;
}
