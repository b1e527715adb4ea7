#!/usr/bin/env bash
# Makes sure the Debian packages the tests run are installed: each argument is PACKAGE:PROGRAM, the
# package and a program it provides (a name on PATH, or an absolute path). Installs the packages whose
# program is missing with apt-get (no service is started: the tests run their own instances); never
# downloads anything from anywhere else.
#   bash scripts/ensure-debian.sh chromium:/usr/bin/chromium nginx:/usr/sbin/nginx caddy:caddy
set -euo pipefail
present() { [ -x "$1" ] || command -v "$1" >/dev/null 2>&1; }
missing=()
for pair in "$@"; do
  present "${pair#*:}" || missing+=("${pair%%:*}")
done
if [ "${#missing[@]}" -eq 0 ]; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-debian: ${missing[*]} missing and apt-get is not available; install them with your package manager" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "ensure-debian: installing Debian's ${missing[*]} (apt-get install -y ${missing[*]})" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2 || {
  $SUDO apt-get update >&2
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2
}
for pair in "$@"; do present "${pair#*:}" || { echo "ensure-debian: ${pair%%:*} installed but ${pair#*:} is still missing" >&2; exit 1; }; done
