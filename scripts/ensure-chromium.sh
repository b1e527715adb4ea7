#!/usr/bin/env bash
# Makes sure Debian's chromium is at /usr/bin/chromium for the dashboard's browser tests.
# Installs it with apt-get when missing; never downloads a browser from anywhere else.
set -euo pipefail
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: $CHROMIUM is missing and apt-get is not available; install chromium with your package manager" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "ensure-chromium: installing Debian's chromium (apt-get install -y chromium)" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y --no-install-recommends chromium >&2 || {
  $SUDO apt-get update >&2
  $SUDO apt-get install -y --no-install-recommends chromium >&2
}
test -x "$CHROMIUM"
