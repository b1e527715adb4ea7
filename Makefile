# modelgate build. Bun is pinned; when `bun` is not on PATH it is installed from the npm registry
# into .tools/ (the `bun` package ships the binary), so a fresh machine needs only Node and npm.
BUN_VERSION := 1.4.5
SYSTEM_BUN := $(shell command -v bun 2>/dev/null)
ifeq ($(SYSTEM_BUN),)
BUN := $(CURDIR)/.tools/node_modules/.bin/bun
else
BUN := $(SYSTEM_BUN)
endif
SOURCES := $(shell find src drizzle -type f 2>/dev/null) package.json bun.lock
# The build's commit, stamped into the binary (`modelgate version`, /api/health, /api/status).
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

.PHONY: run build test test-postgres bench bench-cluster ab install migrations check clean bytecode-order

run: build
	./dist/modelgate serve

build: dist/modelgate

# Memory (docs/benchmarks.md, "Footprint"): --splitting keeps each import() in its own chunk of the
# binary, read and run only when imported (viem, the app's pages); the JIT policy makes JavaScriptCore
# 200 times more reluctant to compile until the server listens (src/main.ts restores it); the
# bytecode a start and a first chat run is laid out together, by build/serve.order (`make bytecode-order`).
ORDER := $(wildcard build/serve.order)
dist/modelgate: node_modules/.installed $(SOURCES) $(ORDER) dist/.commit
	$(BUN) build --compile --splitting --compile-jit-policy=200 $(if $(ORDER),--bytecode-order=$(ORDER)) --minify --bytecode --format=esm --sourcemap=none --define MODELGATE_COMMIT='"$(COMMIT)"' src/main.ts --outfile dist/modelgate

# Rewritten only when HEAD moved, so a commit with no source change still rebuilds with its stamp.
dist/.commit: FORCE
	@mkdir -p dist && echo '$(COMMIT)' | cmp -s - $@ || echo '$(COMMIT)' > $@

FORCE:

install: node_modules/.installed

# bun runs no dependency's install script unless package.json trusts it, and says "Blocked 1
# postinstall": that is @foundry-rs/anvil's download of its binary, which its platform package
# (installed beside it, and what the tests run) already holds. Said plainly after the install.
# Claude Code's postinstall downloads nothing: it puts the native binary of its platform package
# (installed beside it) in place of the stub bin/claude.exe, so it is run here by hand. The
# agents' end-to-end tests (tests/e2e/agents.test.ts) run that binary.
node_modules/.installed: package.json bun.lock $(BUN)
	$(BUN) install --frozen-lockfile
	@$(BUN) pm untrusted 2>/dev/null | grep -q '@foundry-rs/anvil' && echo "note: the blocked postinstall is @foundry-rs/anvil's download of its binary; its platform package holds it already, nothing is missing" || true
	cd node_modules/@anthropic-ai/claude-code && node install.cjs
	touch $@

# Install scripts are not run (recent npm skips them anyway, with a warning): the binary is copied
# from the platform package npm installed beside the `bun` package, as bun's postinstall does.
$(CURDIR)/.tools/node_modules/.bin/bun:
	npm install --no-save --no-audit --no-fund --ignore-scripts --prefix .tools bun@$(BUN_VERSION)
	$@ --version >/dev/null 2>&1 || cp .tools/node_modules/@oven/bun-*/bin/bun .tools/node_modules/bun/bin/bun.exe
	$@ --version

test: check build
	bash scripts/ensure-debian.sh chromium:$${CHROMIUM_PATH:-/usr/bin/chromium} nginx:/usr/sbin/nginx caddy:caddy systemd:systemd-analyze prometheus-alertmanager:/usr/bin/prometheus-alertmanager redis-server:redis-server
	bash scripts/ensure-postgres.sh >/dev/null
	POSTGRES_SUITES="$(POSTGRES_SUITES)" bash scripts/test.sh "$(BUN)"

# The suites that drive the compiled binary, once more on Postgres + Redis (issue 36): with
# MODELGATE_TEST_POSTGRES=1 every gateway tests/support/binary.ts starts serves from a database of
# its own in one shared PostgreSQL cluster, with its own Redis database (tests/support/shared-storage.ts).
POSTGRES_SUITES := tests/core/server.test.ts tests/e2e/openai-sdk.test.ts tests/e2e/cluster.test.ts tests/auth/e2e.test.ts tests/webhooks/binary.test.ts tests/spendauth/e2e.test.ts
test-postgres: build
	bash scripts/ensure-debian.sh redis-server:redis-server
	bash scripts/ensure-postgres.sh >/dev/null
	MODELGATE_TEST_POSTGRES=1 bash scripts/test.sh "$(BUN)" $(POSTGRES_SUITES)

# wrk comes from Debian's packages; Portkey (the peer) is installed by the harness into bench/.peers/.
bench: build
	command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk)
	bash scripts/ensure-debian.sh chromium:$${CHROMIUM_PATH:-/usr/bin/chromium}
	$(BUN) bench/run.ts

# Replicas on SQLite + Redis and on Postgres + Redis against one process in memory (docs/benchmarks.md,
# "Scaling out"); Postgres comes from tests/support/postgres.ts, which installs it when missing.
bench-cluster: build
	command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk)
	bash scripts/ensure-debian.sh redis-server:redis-server
	$(BUN) bench/cluster.ts

# Two builds served at once on one core: `make ab A=path/to/other/modelgate` (B defaults to this build).
B ?= dist/modelgate
ab: build
	command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk)
	test -n "$(A)" || (echo "usage: make ab A=BINARY [B=BINARY] [AB_PATH=paid|key|anonymous]" && exit 2)
	$(BUN) bench/ab.ts "$(A)" "$(B)"

# Records build/serve.order from this build (scripts/bytecode-order.ts), then builds again with it.
bytecode-order: build
	$(BUN) scripts/bytecode-order.ts
	$(MAKE) build

# After a change to src/db/schema/ and src/db/schema-pg/: `make migrations NAME=what_changed` adds the next migration
# under drizzle/ (SQLite) and drizzle/pg/ (Postgres) and embeds them all (databases already in use apply only the new one).
migrations: node_modules/.installed
	test -n "$(NAME)" || (echo "usage: make migrations NAME=what_changed" && exit 2)
	$(BUN) x drizzle-kit generate --name $(NAME) && $(BUN) x drizzle-kit generate --config drizzle.pg.config.ts --name $(NAME) && $(BUN) scripts/embed-migrations.ts

# Types, then Biome's format and lint (biome.jsonc; `bun x biome check --write .` applies them), then
# the import rules of .dependency-cruiser.cjs (no cycles; layers point down), then knip (knip.json:
# no unused file, export or dependency). --bun runs the last two on bun's runtime:
# dependency-cruiser refuses a Node older than 22, which a machine may have.
check: node_modules/.installed
	$(BUN) x tsc --noEmit
	$(BUN) x biome check .
	$(BUN) --bun x depcruise --config .dependency-cruiser.cjs src
	$(BUN) --bun x knip

clean:
	rm -rf dist .tools node_modules
