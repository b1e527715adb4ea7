#!/usr/bin/env bash
# Makes sure Debian's PostgreSQL 15 is installed for the tests (each test starts its own cluster
# in a temporary directory: no service is started here) and, when run as root, that the
# unprivileged user those clusters run as exists: initdb and postgres refuse to run as root.
#   bash scripts/ensure-postgres.sh     # prints the user the clusters run as
set -euo pipefail
bash "$(dirname "$0")/ensure-debian.sh" postgresql-15:/usr/lib/postgresql/15/bin/initdb
USER_NAME="modelgate-test"
if [ "$(id -u)" -ne 0 ]; then id -un; exit 0; fi
if ! id "$USER_NAME" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$USER_NAME" >&2
fi
echo "$USER_NAME"
