/**
 * Every table modelgate keeps, one file per area (drizzle.config.ts reads them through this
 * index). Times are integer milliseconds since the epoch; money is integer micro-credits
 * (1 credit = 1,000,000). Secrets are never stored, only their SHA-256 (hex). After editing (here
 * and in ../schema-pg/), run `make migrations` (regenerates drizzle/ and the embedded copy).
 */
export * from "./accounts";
export * from "./credits";
export * from "./requests";
export * from "./spendauth";
export * from "./webhooks";
export * from "./routing";
export * from "./triage";
export * from "./coordination";
