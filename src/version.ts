import pkg from "../package.json";

export const VERSION: string = pkg.version;
/** The interface description this build implements. */
export const INTERFACE_VERSION = "2026-06-16";
