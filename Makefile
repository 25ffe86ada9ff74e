# The user-facing commands. Each script installs what it needs first.
.PHONY: demo test bench bench-replay chaos package test-package fmt

demo:   ## set up from nothing and run the demo on a throwaway PostgreSQL 15 cluster
	bash scripts/demo.sh

test:   ## set up from nothing and run every test (PG_VERSIONS="15 18" by default)
	bash scripts/test.sh

bench:  ## benchmark the generators against nextval, gen_random_uuid() and the peers
	bash scripts/bench.sh
	bash scripts/bench-replay.sh

bench-replay: ## how long a server takes to replay a long archive of reservation records
	bash scripts/bench-replay.sh

chaos:  ## a Jepsen-style fault run over a replicated fleet (MODE, SEED, DURATION, SABOTAGE)
	bash scripts/chaos.sh

package: ## Debian packages postgresql-NN-snowflake-id for PostgreSQL 14-18 (PG_VERSIONS to choose)
	bash scripts/package.sh

test-package: ## the PostgreSQL 15 package end to end on Debian's own server (installs and removes it)
	bash scripts/test-package.sh

fmt:
	cargo fmt
