#!/usr/bin/env bun
/**
 * Entry point: argv -> a CLI command; `serve` is the default. Expected failures (a bad config, a
 * bad flag) print one line naming the problem and exit 1; never a stack trace.
 */
import { runCli } from "./cli";

const code = await runCli(process.argv.slice(2));
if (code !== null) process.exit(code);
