/**
 * Loaded before every test run (bunfig.toml): hooks that span the whole run rather than one file.
 * A global afterAll is the one place that runs once the last file is done; a process "exit"
 * handler does not run under `bun test`.
 */
import { afterAll } from "bun:test";
import { stopSharedStorage } from "./shared-storage";

afterAll(stopSharedStorage);
