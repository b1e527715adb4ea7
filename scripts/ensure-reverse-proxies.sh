#!/usr/bin/env bash
# Makes sure Debian's nginx and caddy are on PATH for the test that runs the examples in
# examples/nginx and examples/caddy in front of the gateway. Installs whichever is missing with
# apt-get (its service is not started: the test runs its own instance); never downloads either from
# anywhere else.
set -euo pipefail
missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
if [ "${#missing[@]}" -eq 0 ]; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-reverse-proxies: ${missing[*]} missing and apt-get is not available; install them with your package manager" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "ensure-reverse-proxies: installing Debian's ${missing[*]} (apt-get install -y ${missing[*]})" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2 || {
  $SUDO apt-get update >&2
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2
}
{ command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } && command -v caddy >/dev/null
