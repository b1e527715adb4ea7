#!/usr/bin/env bash
# Makes sure systemd-analyze is on PATH for the test that verifies examples/systemd/modelgate.service.
# Installs Debian's systemd package with apt-get when missing (it ships the tool; nothing is started);
# never downloads it from anywhere else.
set -euo pipefail
if command -v systemd-analyze >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-systemd-analyze: systemd-analyze is missing and apt-get is not available; install systemd with your package manager" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "ensure-systemd-analyze: installing Debian's systemd (apt-get install -y systemd)" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y --no-install-recommends systemd >&2 || {
  $SUDO apt-get update >&2
  $SUDO apt-get install -y --no-install-recommends systemd >&2
}
command -v systemd-analyze >/dev/null
