#!/usr/bin/env bash
# The client examples against a real server (docs/clients.md): Django and SQLAlchemy models with
# DEFAULT snowflake_next() through psycopg 3 (examples/python), node-postgres, JSON and the BigInt
# decoder (examples/node), and both decoders against snowflake_decode(id, layout, epoch).
#
#   bash examples/test.sh        # expects snowflake_id installed into PostgreSQL 15
#
# The venv (target/clients/venv) and node_modules (examples/node/node_modules) are installed
# from the pinned examples/python/requirements.txt and examples/node/package-lock.json, and kept
# while those files do not change; pip's and npm's caches make a fresh checkout's install quick.
# Starts a throwaway PostgreSQL 15 cluster and stops it again.
# Prints "clients: N passed, N failed" and exits non-zero on any failure.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

V=15 NAME=clients15 PORT=5515
EXAMPLES="$REPO_ROOT/examples"
VENV="$REPO_ROOT/target/clients/venv"
PASSED=0 FAILED=0
command -v npm >/dev/null || need_debian_packages nodejs npm

# The venv, unless it was made from the same requirements by the same Python.
stamp="$(cat "$EXAMPLES/python/requirements.txt" <(python3 --version) | sha256sum | cut -c1-16)"
if [ "$(cat "$VENV/.stamp" 2>/dev/null)" != "$stamp" ]; then
  log "installing the Python clients (examples/python/requirements.txt) into $VENV"
  start=$SECONDS
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --only-binary :all: -r "$EXAMPLES/python/requirements.txt"
  echo "$stamp" >"$VENV/.stamp"
  log "Python clients installed in $((SECONDS - start)) s"
fi
# node_modules, unless npm installed it from this lock file.
if ! cmp -s "$EXAMPLES/node/package-lock.json" "$EXAMPLES/node/node_modules/.installed-lock.json"; then
  log "installing the Node.js client (examples/node/package-lock.json)"
  start=$SECONDS
  (cd "$EXAMPLES/node" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$EXAMPLES/node/package-lock.json" "$EXAMPLES/node/node_modules/.installed-lock.json"
  log "Node.js client installed in $((SECONDS - start)) s"
fi

log "starting a throwaway PostgreSQL $V cluster with snowflake_id.shards = '0-127'"
CLUSTER_CONF="snowflake_id.shards = '0-127'" cluster_start "$V" "$NAME" "$PORT" yes
trap 'cluster_stop "$V" "$NAME" || true' EXIT
cluster_env "$V" "$NAME" "$PORT"
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE sfid_clients" \
  -c '\c sfid_clients' -c "CREATE EXTENSION snowflake_id" >/dev/null
export PGDATABASE=sfid_clients

# add PASSED FAILED STATUS: one suite's counts. A suite that counted nothing, or failed without
# counting a failure, is one failure.
add() {
  local p="${1:-0}" f="${2:-0}"
  if [ "$f" -eq 0 ] && { [ "$p" -eq 0 ] || [ "$3" -ne 0 ]; }; then f=1; fi
  PASSED=$((PASSED + p)) FAILED=$((FAILED + f))
}
out="$(mktemp)"
trap 'rm -f "$out"; cluster_stop "$V" "$NAME" || true' EXIT

# Python: the script ends with "python: N passed, N failed", counting tests as node's runner does.
log "Python: Django, SQLAlchemy, psycopg 3, the decoder"
rc=0
(cd "$EXAMPLES/python" && PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" test_clients.py) 2>&1 | tee "$out" || rc=$?
add "$(sed -nE 's/^python: ([0-9]+) passed, [0-9]+ failed$/\1/p' "$out" | tail -n 1)" \
  "$(sed -nE 's/^python: [0-9]+ passed, ([0-9]+) failed$/\1/p' "$out" | tail -n 1)" "$rc"

# Node.js: the TAP reporter ends with "# pass N" and "# fail N".
log "Node.js: node-postgres, JSON, the BigInt decoder"
rc=0
(cd "$EXAMPLES/node" && node --test --test-reporter=tap clients.test.js) 2>&1 | tee "$out" || rc=$?
add "$(sed -nE 's/^# pass ([0-9]+)$/\1/p' "$out" | tail -n 1)" \
  "$(sed -nE 's/^# fail ([0-9]+)$/\1/p' "$out" | tail -n 1)" "$rc"

echo "clients: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
