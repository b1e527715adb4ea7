/**
 * Strings of the config schema that must have a form, each with the words a message uses for it
 * (`expected`, read by validate.ts).
 */
import { Type as T } from "@sinclair/typebox";

export const HTTP_URL_PATTERN = { pattern: "^https?://", expected: "an http:// or https:// URL" };

export const HTTP_URL = T.String(HTTP_URL_PATTERN);

/** An Ethereum address: 0x and 40 hex digits. */
export const ETH_ADDRESS = T.String({ pattern: "^0x[0-9a-fA-F]{40}$", expected: "an address: 0x and 40 hex digits" });
