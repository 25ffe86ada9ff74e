# The user-facing commands. Each script installs what it needs first.
.PHONY: help demo test bench bench-replay bench-instructions bench-isolation chaos package test-package extension-image test-image repo dist install fmt

help:   ## list the commands (a plain `make` does nothing else)
	@sed -n 's/^\([a-z-]*\): *## \(.*\)/  make \1\t\2/p' $(MAKEFILE_LIST) | expand -t 28

demo:   ## set up from nothing and run the demo on a throwaway PostgreSQL 15 cluster
	bash scripts/demo.sh

test:   ## set up from nothing and run every test (PG_VERSIONS="15 18" by default)
	bash scripts/test.sh

bench:  ## benchmark the generators against nextval, gen_random_uuid() and the peers
	bash scripts/bench-instructions.sh
	bash scripts/bench.sh
	bash scripts/bench-replay.sh
	bash scripts/bench-isolation.sh

bench-replay: ## how long a server takes to replay a long archive of reservation records
	bash scripts/bench-replay.sh

bench-instructions: ## CPU instructions per id (callgrind): repeatable where timings are noisy
	bash scripts/bench-instructions.sh

bench-isolation: ## one database's flood beside another database's calls: waits, errors, lead
	bash scripts/bench-isolation.sh

chaos:  ## a Jepsen-style fault run over a replicated fleet (MODE, SEED, DURATION, SABOTAGE)
	bash scripts/chaos.sh

package: ## Debian packages postgresql-NN-snowflake-id for PostgreSQL 14-18 (PG_VERSIONS to choose)
	bash scripts/package.sh

test-package: ## the PostgreSQL 15 package end to end on Debian's own server (installs and removes it)
	bash scripts/test-package.sh

extension-image: ## an OCI image of the PostgreSQL 18 extension for CloudNativePG (target/image/snowflake-id)
	bash scripts/image.sh

test-image: ## the image's files on a PostgreSQL 18 server that has none of its own (make extension-image first)
	bash scripts/test-image.sh

repo:   ## a signed apt repository in target/repo: this and the previous release (PG_VERSIONS)
	bash scripts/repo.sh

dist:   ## the source archive PGXN takes, target/dist/snowflake_id-VERSION.zip
	bash scripts/dist.sh

# As PGXN's client and PGXS users expect: `make install` into the server PG_CONFIG names, with a
# Rust toolchain and cargo-pgrx 0.18.1 (see docs/install.md, "From source").
PG_CONFIG ?= pg_config
PG_MAJOR = $(shell $(PG_CONFIG) --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
install: ## build and install into the PostgreSQL that PG_CONFIG names (cargo-pgrx needed)
	cargo pgrx install --release --no-default-features --features pg$(PG_MAJOR) --pg-config $(PG_CONFIG)

fmt:
	cargo fmt
