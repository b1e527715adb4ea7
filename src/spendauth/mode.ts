/**
 * Whether SpendAuth is on, decided from the config alone. Kept apart from the verifier so that
 * start-up can decide without loading viem: a gateway with SpendAuth off never loads it.
 */
import type { Config } from "../config/schema";

export type SpendAuthMode = "chain" | "allowlist" | "off";

export function spendAuthMode(config: Pick<Config, "spend_auth">): SpendAuthMode {
  if (config.spend_auth.rpc_url) return "chain";
  return config.spend_auth.allowed_signers.length > 0 ? "allowlist" : "off";
}
