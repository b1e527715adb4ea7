#!/usr/bin/env bash
# Runs every bun:test file (or those named after the first argument) and closes with the plain
# line `N passed, N failed`. With POSTGRES_SUITES set (make test), those files then run once more
# with MODELGATE_TEST_POSTGRES=1 (every gateway on Postgres + Redis), and the closing line counts
# both runs.
set -uo pipefail
BUN="${1:-bun}"
# Every temporary file the tests make (databases, data dirs, browser profiles) goes under one
# directory, removed at the end, so runs leave nothing behind in /tmp.
scratch="$(mktemp -d -t modelgate-tests-XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
passed=0
failed=0
status=0

# run [ENV=VALUE ...] -- FILES...: one bun test run, its counts added to the totals.
run() {
  local log="$scratch/run.log"
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" TMPDIR="$scratch" "$BUN" test --timeout 60000 "$@" 2>&1 | tee "$log"
  local code=${PIPESTATUS[0]}
  local p f
  p=$(grep -Eo '^ *[0-9]+ pass$' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
  f=$(grep -Eo '^ *[0-9]+ fail$' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
  if [ "$code" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + p))
  failed=$((failed + f))
  if [ "$code" -ne 0 ]; then status=$code; fi
}

run -- "${@:2}"
if [ -n "${POSTGRES_SUITES:-}" ]; then
  # shellcheck disable=SC2086 # a list of file names
  run MODELGATE_TEST_POSTGRES=1 -- $POSTGRES_SUITES
fi
echo "${passed} passed, ${failed} failed"
exit "$status"
