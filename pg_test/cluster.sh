# Cluster-level tests, sourced by pg_test/run.sh with a running preloaded cluster, the
# database sfid_cluster (extension created), and the helpers q, check, pass and fail.
#
# Sizes come from the issues: 4 connections x 250,000 rows, and 1,000,000 rows for order.
CONC_CLIENTS="${CONC_CLIENTS:-4}"
CONC_ROWS="${CONC_ROWS:-250000}"
KSORT_ROWS="${KSORT_ROWS:-1000000}"

# run_clients N SQL_TEMPLATE: N concurrent psql sessions, each running SQL_TEMPLATE with
# :c replaced by its client number (1..N). Returns the number of sessions that failed.
run_clients() {
  local n="$1" tmpl="$2" pids=() failed=0
  for c in $(seq 1 "$n"); do
    (echo "${tmpl//:c/$c}" | psql -X -q -v ON_ERROR_STOP=1 -d sfid_cluster >/dev/null 2>"$OUT/client$c.err") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  [ "$failed" -eq 0 ] || cat "$OUT"/client*.err >&2
  return "$failed"
}

# --- Concurrency: many backends, one shard, one primary key --------------------------------
log "concurrency: $CONC_CLIENTS connections x $CONC_ROWS rows into one primary key, all on shard 1"
q -c "CREATE TABLE conc (id bigint PRIMARY KEY DEFAULT snowflake_next(1), client int NOT NULL, n int NOT NULL)"
batch=$((CONC_ROWS / 10))
tmpl=""
for b in $(seq 0 9); do
  tmpl+="INSERT INTO conc (client, n) SELECT :c, g FROM generate_series($((b * batch + 1)), $(((b + 1) * batch))) g;"$'\n'
done
if run_clients "$CONC_CLIENTS" "$tmpl"; then
  pass "concurrency: $CONC_CLIENTS clients inserted with no error (no unique violation)"
else
  fail "concurrency: a client failed (see the errors above)"
fi
check "concurrency: every row landed, every id distinct" \
  "$((CONC_CLIENTS * CONC_ROWS))|$((CONC_CLIENTS * CONC_ROWS))" "$(q -c "SELECT count(*), count(DISTINCT id) FROM conc")"
check "concurrency: each connection's ids strictly increase" "0" \
  "$(q -c "SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY client ORDER BY n) prev FROM conc) s WHERE id <= prev")"
# Without this, a run where the clients happened to go one after another would prove little.
check "concurrency: the clients really interleaved (over 1,000 client switches in id order)" "t" \
  "$(q -c "SELECT count(*) > 1000 FROM (SELECT client, lag(client) OVER (ORDER BY id) prev FROM conc) s WHERE client <> prev")"
check "concurrency: no millisecond of one shard holds more than 512 ids" "t" \
  "$(q -c "SELECT max(c) <= 512 FROM (SELECT count(*) c FROM conc GROUP BY snowflake_timestamp(id)) s")"
# Parallel workers draw from the same shared counter as everyone else.
check "parallel workers mint unique ids" "200000|200000" "$(q <<'SQL'
SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
CREATE TABLE src AS SELECT g FROM generate_series(1, 200000) g;
ANALYZE src;
SELECT count(*), count(DISTINCT id) FROM (SELECT snowflake_next(2) AS id FROM src) s;
SQL
)"

# --- k-sortedness: ids from a later millisecond sort after earlier ones -------------------------
log "k-sortedness: $KSORT_ROWS rows from $CONC_CLIENTS connections on different shards, 1,249 random pairs"
q -c "CREATE TABLE ks (created_at timestamptz NOT NULL, id bigint NOT NULL, u uuid NOT NULL)"
per=$((KSORT_ROWS / CONC_CLIENTS / 10))
tmpl=""
for b in $(seq 1 10); do
  tmpl+="INSERT INTO ks SELECT clock_timestamp(), snowflake_next(100 + :c), gen_random_uuid() FROM generate_series(1, $per);"$'\n'
done
run_clients "$CONC_CLIENTS" "$tmpl" || fail "k-sortedness: a client failed"
# Pairs of rows created at least 1 ms apart, drawn with a fixed seed. A pair is inverted when
# the order of ids disagrees with the order of creation.
result="$(q <<'SQL'
SELECT setseed(0.1249);
WITH r AS (SELECT row_number() OVER (ORDER BY created_at, id) AS rn, * FROM ks),
total AS (SELECT count(*) AS n FROM ks),
pairs AS (SELECT 1 + floor(random() * n)::int AS a, 1 + floor(random() * n)::int AS b, k
          FROM total, generate_series(1, 20000) k),
p AS (SELECT x.created_at < y.created_at AS created_before, x.id < y.id AS id_before, x.u < y.u AS uuid_before
      FROM pairs JOIN r x ON x.rn = pairs.a JOIN r y ON y.rn = pairs.b
      WHERE abs(extract(epoch FROM x.created_at - y.created_at)) >= 0.001
      ORDER BY k LIMIT 1249)
SELECT count(*) || '|' || count(*) FILTER (WHERE created_before <> id_before)
       || '|' || count(*) FILTER (WHERE created_before <> uuid_before) FROM p;
SQL
)"
result="${result##*$'\n'}"
IFS='|' read -r pairs id_inv uuid_inv <<<"$result"
echo "  pairs=$pairs, inverted by snowflake id=$id_inv, inverted by gen_random_uuid()=$uuid_inv"
check "k-sortedness: 1,249 pairs at least 1 ms apart were drawn" "1249" "$pairs"
check "k-sortedness: 0 pairs inverted by snowflake id" "0" "$id_inv"
if [ "${uuid_inv:-0}" -ge 500 ] && [ "${uuid_inv:-0}" -le 750 ]; then
  pass "k-sortedness: gen_random_uuid() inverts about half ($uuid_inv of 1249), so the check can see disorder"
else
  fail "k-sortedness: gen_random_uuid() inverted $uuid_inv of 1249, expected about half"
fi

# --- The clock policy: strict mode never runs ahead, the default lead is bounded ----------------
log "clock policy: strict and default lead"
check "max_lead = 0: no id carries a millisecond later than the clock at the call" "0" \
  "$(q -c "SET snowflake_id.max_lead = 0" -c "SELECT count(*) FROM (SELECT snowflake_next(3) AS id, clock_timestamp() AS c FROM generate_series(1, 50000)) s WHERE snowflake_timestamp(id) > c")"
check "max_lead = 5ms: no id is more than 5 ms ahead of the clock" "0" \
  "$(q -c "SELECT count(*) FROM (SELECT snowflake_next(4) AS id, clock_timestamp() AS c FROM generate_series(1, 50000)) s WHERE snowflake_timestamp(id) > c + interval '5 ms'")"
check "max_lead and max_rewind_wait are superuser settings" "42501" \
  "$(q -c "CREATE ROLE sf_plain LOGIN" -c "SET ROLE sf_plain" -c "\\set ON_ERROR_STOP 0" -c "SET snowflake_id.max_lead = 1" -c "\\echo :LAST_ERROR_SQLSTATE" 2>/dev/null | tail -n 1)"

# --- Layouts are chosen at server start, and bad ones are refused ----------------------------------
log "layouts at server start"
conf="$SNOWFLAKE_RUN_DIR/$NAME/data/postgresql.conf"
set_conf() { as_postgres sed -i '/^snowflake_id\./d' "$conf"; [ $# -eq 0 ] || printf '%s\n' "$@" | as_postgres tee -a "$conf" >/dev/null; }
check "ALTER SYSTEM refuses an overwide layout at once" "22023" \
  "$(q -c "\\set ON_ERROR_STOP 0" -c "ALTER SYSTEM SET snowflake_id.layout = '41/13/10'" -c "\\echo :LAST_ERROR_SQLSTATE" 2>/dev/null | tail -n 1)"
check "ALTER SYSTEM refuses an epoch in the future" "22023" \
  "$(q -c "\\set ON_ERROR_STOP 0" -c "ALTER SYSTEM SET snowflake_id.epoch = '2999-01-01'" -c "\\echo :LAST_ERROR_SQLSTATE" 2>/dev/null | tail -n 1)"
check "layout and epoch cannot change on a running server" "55P02" \
  "$(q -c "\\set ON_ERROR_STOP 0" -c "SET snowflake_id.layout = 'twitter'" -c "\\echo :LAST_ERROR_SQLSTATE" 2>/dev/null | tail -n 1)"

set_conf "snowflake_id.layout = 'sonyflake'" "snowflake_id.epoch = '2020-01-01 00:00:00+00'"
cluster_restart "$V" "$NAME"
check "sonyflake preset at start: the layout reports it" "39/16/8@10ms|2020-01-01 00:00:00+00|65535|25.6" \
  "$(q -c "SELECT layout, epoch, max_shard, ids_per_ms FROM snowflake_layout()")"
check "sonyflake preset: the largest shard mints and decodes" "65535|t" \
  "$(q -c "SELECT snowflake_shard(id), snowflake_timestamp(id) > now() - interval '1 min' FROM (SELECT snowflake_next(65535) id) s")"
check "sonyflake preset: 10 ms ticks hold 256 ids, then the next tick" "t" \
  "$(q -c "SELECT max(c) <= 256 AND count(*) >= 4 FROM (SELECT count(*) c FROM (SELECT snowflake_next(9) id FROM generate_series(1, 1024)) s GROUP BY snowflake_timestamp(id)) t")"

for bad in "snowflake_id.layout = '41/13/10'|needs 64 bits" \
           "snowflake_id.epoch = '2999-01-01'|is in the future" \
           "snowflake_id.layout = 'instagram'|is not a snowflake layout"; do
  setting="${bad%%|*}" message="${bad#*|}"
  set_conf "$setting"
  : | as_postgres tee "$SNOWFLAKE_RUN_DIR/$NAME/server.log" >/dev/null
  if as_postgres "$(pg_bin "$V")/pg_ctl" -D "$SNOWFLAKE_RUN_DIR/$NAME/data" -l "$SNOWFLAKE_RUN_DIR/$NAME/server.log" -w -t 30 -m fast restart >/dev/null 2>&1; then
    fail "the server started with $setting"
  elif grep -q "$message" "$SNOWFLAKE_RUN_DIR/$NAME/server.log"; then
    pass "the server refuses to start with $setting, saying \"$message\""
  else
    fail "the server did not start with $setting, but the log lacks \"$message\""
    tail -n 5 "$SNOWFLAKE_RUN_DIR/$NAME/server.log"
  fi
done
set_conf
cluster_restart "$V" "$NAME"
check "back on the default layout" "41/13/9" "$(q -c "SELECT layout FROM snowflake_layout()")"
