/**
 * What this build is: the release (package.json's version), the commit it was built from (stamped
 * by `make build` with `--define MODELGATE_COMMIT`; "unknown" when run from source or built outside
 * a git checkout) and the interface description it implements.
 */
import pkg from "../package.json";

declare const MODELGATE_COMMIT: string | undefined;

export const VERSION: string = pkg.version;
export const COMMIT: string = typeof MODELGATE_COMMIT === "string" && MODELGATE_COMMIT !== "" ? MODELGATE_COMMIT : "unknown";
/** The interface description this build implements. */
export const INTERFACE_VERSION = "2026-06-16";
