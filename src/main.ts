#!/usr/bin/env bun
/**
 * Entry point: argv -> a CLI command; `serve` is the default. Expected failures (a bad config, a
 * bad flag) print one line naming the problem and exit 1; never a stack trace.
 *
 * The binary starts with JavaScriptCore's JIT made reluctant (`--compile-jit-policy` in the
 * Makefile): start-up code runs once, and compiling it would only fill memory. Once the server
 * listens, the normal policy returns, so the request paths are compiled as they always were.
 */
import { runCli } from "./cli";

/** Bun.unsafe.setJITPolicy (Bun 1.4), which @types/bun 1.3 does not declare. */
const jit = Bun.unsafe as unknown as { setJITPolicy(scale: number): void };

const code = await runCli(process.argv.slice(2));
if (code !== null) process.exit(code);
jit.setJITPolicy(1);
