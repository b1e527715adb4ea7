#!/usr/bin/env bash
# Runs every bun:test file (or those the arguments after the first name) and closes with the
# plain line `N passed, N failed`.
set -uo pipefail
BUN="${1:-bun}"
log="$(mktemp)"
# Every temporary file the tests make (databases, data dirs, browser profiles) goes under one
# directory, removed at the end, so runs leave nothing behind in /tmp.
scratch="$(mktemp -d -t modelgate-tests-XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
TMPDIR="$scratch" "$BUN" test --timeout 60000 "${@:2}" 2>&1 | tee "$log"
code=${PIPESTATUS[0]}
passed=$(grep -Eo '^ *[0-9]+ pass$' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
failed=$(grep -Eo '^ *[0-9]+ fail$' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
rm -f "$log"
if [ "$code" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "${passed} passed, ${failed} failed"
exit "$code"
