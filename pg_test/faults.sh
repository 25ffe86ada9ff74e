# Fault tests against a real cluster, sourced by pg_test/run.sh with a running preloaded cluster,
# the database sfid_cluster (extension created), the role sf_plain, and the helpers of run.sh
# (q, check, pass, fail, sqlstate, pg_ctl_, wait_ready, ...) and cluster.sh (run_clients). They crash and restart the cluster, step the generators' clock
# (snowflake_id.debug_clock_offset), load it hard, fence shards and feed every function bad input.
#
# Sizes: LOAD_CLIENTS x LOAD_ROWS (default 8 x 1,250,000 = 10,000,000 ids).
LOAD_CLIENTS="${LOAD_CLIENTS:-8}"
LOAD_ROWS="${LOAD_ROWS:-1250000}"
# --- 6. Bad input: every function, NULL, negative, out of range, wrong type --------------------
log "faults: bad input to every SQL function"
log_lines_before="$(wc -l <"$LOG")"
while IFS='|' read -r expected sql; do
  [ -n "$sql" ] || continue
  got="$(sqlstate "SELECT $sql")"
  check "bad input: $sql -> $expected" "$expected" "$got"
done <<'CASES'
22004|snowflake_next(NULL)
22003|snowflake_next(-1)
22003|snowflake_next(8192)
22003|snowflake_next(2147483647)
22003|snowflake_next(-2147483648)
22P02|snowflake_next('abc')
42883|snowflake_next(1.5)
42883|snowflake_next(1, 2)
null|snowflake_decode(NULL)
22003|snowflake_decode(-1)
22003|snowflake_decode(-9223372036854775808)
ok|snowflake_decode(9223372036854775807)
22P02|snowflake_decode('x')
22003|snowflake_timestamp(-1)
22003|snowflake_shard(-1)
22003|snowflake_seq(-42)
null|snowflake_seq(NULL)
42883|snowflake_seq(now())
null|snowflake_min_id(NULL)
22008|snowflake_min_id('-infinity')
22008|snowflake_min_id('infinity')
22008|snowflake_min_id('1900-01-01')
22008|snowflake_max_id('3000-01-01')
22007|snowflake_max_id('garbage')
ok|snowflake_layout(NULL)
22023|snowflake_layout('')
22023|snowflake_layout('99/99/99')
22023|snowflake_layout('41/13/9@-1ms')
22008|snowflake_layout('default', 'infinity')
22023|snowflake_layout('default', '1969-01-01')
null|uuidv7_next(NULL::interval)
22008|uuidv7_next('-100 years')
22008|uuidv7_next('10000 years')
22007|uuidv7_next('forever'::interval)
null|uuidv7_timestamp(NULL)
null|uuidv7_timestamp('00000000-0000-0000-0000-000000000000')
22P02|uuidv7_timestamp('nope')
22008|uuidv7_min_id('infinity')
22008|uuidv7_min_id('1960-01-01')
22008|uuidv7_max_id('11000-01-01')
null|uuid_extract_timestamp('6ba7b810-9dad-41d1-80b4-00c04fd430c8')
null|uuid_extract_version(NULL)
CASES
check "bad input: snowflake_id_stats_reset() is refused to a plain user" "42501" \
  "$(sqlstate "SET ROLE sf_plain" "SELECT snowflake_id_stats_reset()")"
check "bad input: snowflake_id.debug_clock_offset is refused to a plain user" "42501" \
  "$(sqlstate "SET ROLE sf_plain" "SET snowflake_id.debug_clock_offset = -1000")"
check "bad input: snowflake_id.clock_source is refused to a plain user" "42501" \
  "$(sqlstate "SET ROLE sf_plain" "SET snowflake_id.clock_source = system")"
check "bad input: snowflake_id.clock_source takes auto or system only" "22023" \
  "$(sqlstate "SET snowflake_id.clock_source = tsc")"
check "bad input: snowflake_id.clock_source_status is read-only" "55P02" \
  "$(sqlstate "SET snowflake_id.clock_source_status = tsc")"
check "bad input: ALTER ROLE cannot widen the shard fence either" "55P02" \
  "$(sqlstate "ALTER ROLE sf_plain SET snowflake_id.shards = '*'")"
if tail -n +"$((log_lines_before + 1))" "$LOG" | grep -Eq "terminated by signal|was terminated|PANIC"; then
  fail "bad input: the server log shows a crashed backend"
else
  pass "bad input: no backend crashed (server log clean)"
fi

# --- 5. Shard fencing and the default shard -----------------------------------------------------
log "faults: shard fencing"
q -c "ALTER SYSTEM SET snowflake_id.shards = '0-15,40'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
check "fencing: the setting is in force" "0-15,40" "$(q -c "SHOW snowflake_id.shards")"
check "fencing: shard 41 (outside the list) is refused" "22023" "$(sqlstate "SELECT snowflake_next(41)")"
check "fencing: shard 16 (past a range) is refused" "22023" "$(sqlstate "SELECT snowflake_next(16)")"
check "fencing: shards 0, 15 and 40 are accepted" "0|15|40" \
  "$(q -c "SELECT snowflake_shard(snowflake_next(0)), snowflake_shard(snowflake_next(15)), snowflake_shard(snowflake_next(40))")"
check "fencing: a DEFAULT on a fenced shard fails the insert" "22023" \
  "$(sqlstate "CREATE TEMP TABLE fenced (id bigint PRIMARY KEY DEFAULT snowflake_next(99))" "INSERT INTO fenced DEFAULT VALUES")"
check "fencing: the refusal says which shards this server owns" "t" \
  "$( { psql -X -d sfid_cluster -c "SELECT snowflake_next(41)" 2>&1 || true; } | grep -q 'snowflake_id.shards is "0-15,40"' && echo t || echo f)"
check "fencing: a list beyond the layout is refused" "22023" \
  "$(sqlstate "ALTER SYSTEM SET snowflake_id.shards = '0-9000'")"
# snowflake_next() mints from the server's own shards: the first with room in the current tick.
# How many ids a millisecond one backend mints depends on the machine, so the spread is not
# assumed: whatever the speed, no id may be borrowed ahead of the clock while another owned shard
# has room in the tick (16 shards hold 8,192 ids a millisecond, more than one backend mints).
q -c "SELECT snowflake_id_stats_reset()" >/dev/null
check "owned shards: one backend's 50,000 snowflake_next() in order, every id new and increasing, none borrowed while a shard had room" "t|50000|0|0" \
  "$(q -c "WITH s AS (SELECT n, snowflake_next() AS id FROM generate_series(1, 50000) n),
                d AS (SELECT id, snowflake_shard(id) AS shard, lag(id) OVER (ORDER BY n) AS prev FROM s)
           SELECT bool_and(shard BETWEEN 0 AND 15 OR shard = 40), count(DISTINCT id), count(*) FILTER (WHERE id <= prev) FROM d")|$(
     q -c "SELECT coalesce(sum(ahead_ticks), 0) FROM snowflake_id_stats WHERE generator = 'snowflake'")"
check "owned shards: in one millisecond the first shard fills before the next is used" "0" \
  "$(q -c "WITH s AS (SELECT n, snowflake_next() AS id FROM generate_series(1, 20000) n),
                d AS (SELECT snowflake_timestamp(id) AS t, snowflake_shard(id) AS shard, max(snowflake_seq(id)) AS top FROM s GROUP BY 1, 2)
           SELECT count(*) FROM d a WHERE a.shard BETWEEN 1 AND 15
             AND NOT EXISTS (SELECT 1 FROM d b WHERE b.t = a.t AND b.shard = a.shard - 1 AND b.top = 511)")"
# A clock that steps back: snowflake_next() must not let an idle shard take the earlier time.
check "owned shards: a clock 1 h behind what snowflake_next() saw: refused (58000), though shards sat idle" "58000" \
  "$(sqlstate "SELECT snowflake_next()" "SET snowflake_id.debug_clock_offset = -3600000" "SELECT snowflake_next()")"
# Waited out: the call returned only once the session's clock (300 ms behind) reached the earlier
# id's tick, less the 5 ms lead (and a tick); judged on the clocks, not on how long the statements
# took.
check "owned shards: a clock 300 ms behind: waited out, and the next id is above the one before" "t|t" \
  "$(q -c "CREATE TEMP TABLE before AS SELECT snowflake_next() AS id" -c "SET snowflake_id.debug_clock_offset = -300" \
       -c "SELECT snowflake_next() > (SELECT id FROM before),
                  clock_timestamp() - interval '300 ms' >= snowflake_timestamp((SELECT id FROM before)) - interval '10 ms'")"
check "default shard: snowflake_next() mints for snowflake_id.default_shard, one of the set" "40" \
  "$(q -c "SET snowflake_id.default_shard = 40" -c "SELECT snowflake_shard(snowflake_next())")"
check "default shard: a default shard outside the set is refused" "22023" \
  "$(sqlstate "SET snowflake_id.default_shard = 41" "SELECT snowflake_next()")"
q -c "ALTER SYSTEM RESET snowflake_id.shards" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
check "a server whose shards are '*' (never told what it owns): snowflake_next() refuses with 55000" "55000" \
  "$(sqlstate "SELECT snowflake_next()")"
check "0.1.0's configuration (a default shard, the list left at '*') keeps minting, with a WARNING" "3|t" \
  "$(psql -X -q -A -t -d sfid_cluster -c "SET snowflake_id.default_shard = 3" -c "SELECT snowflake_shard(snowflake_next())" 2>"$OUT/warn.txt")|$(grep -q "WARNING:.*mints for snowflake_id.default_shard (3)" "$OUT/warn.txt" && echo t || echo f)"
check "the refusal's hint gives the one line to add" "t" \
  "$( { psql -X -d sfid_cluster -c "SELECT snowflake_next()" 2>&1 || true; } | grep -q "HINT:.*snowflake_id.shards = '128-255' on server 1" && echo t || echo f)"
check "snowflake_next(shard) keeps minting for a shard the caller names" "ok" "$(sqlstate "SELECT snowflake_next(3)")"

# --- 3. Steps of the clock while running ------------------------------------------------------
log "faults: the clock steps back 5 ms, 1 s and 1 h while running"
res="$(q <<'SQL'
SELECT snowflake_next(5) AS a, uuidv7_next() AS ua \gset
SET snowflake_id.debug_clock_offset = -5;
SELECT clock_timestamp() AS t0 \gset
SELECT snowflake_next(5) AS b, uuidv7_next() AS ub \gset
SELECT (clock_timestamp() - :'t0') < interval '200 ms' AS fast_5ms, :b > :a AS b_gt_a, :'ub' > :'ua' AS ub_gt_ua \gset
SET snowflake_id.debug_clock_offset = -1000;
SELECT clock_timestamp() AS t1 \gset
SELECT snowflake_next(5) AS c \gset
SELECT clock_timestamp() - :'t1' BETWEEN interval '800 ms' AND interval '3 s' AS waited_1s, :c > :b AS c_gt_b \gset
SELECT uuidv7_next() AS uc \gset
SET snowflake_id.debug_clock_offset = -3600000;
SELECT clock_timestamp() AS t2 \gset
\set ON_ERROR_STOP 0
SELECT snowflake_next(5);
\echo SNOWFLAKE_1H :LAST_ERROR_SQLSTATE
SELECT uuidv7_next();
\echo UUID_1H :LAST_ERROR_SQLSTATE
\set ON_ERROR_STOP 1
SELECT (clock_timestamp() - :'t2') < interval '200 ms' AS refused_at_once \gset
SET snowflake_id.debug_clock_offset = 0;
SELECT snowflake_next(5) AS d, uuidv7_next() AS ud \gset
\echo RESULT :fast_5ms :b_gt_a :ub_gt_ua :waited_1s :c_gt_b :refused_at_once
SELECT :d > :c AS d_gt_c, :'ud' > :'uc' AND :'uc' > :'ub' AS uuid_order;
SQL
)"
echo "$res" | sed 's/^/  /'
check "clock step 5 ms: absorbed by the lead, ids keep increasing (snowflake, uuidv7)" "t t t" \
  "$(echo "$res" | sed -n 's/^RESULT \([tf]\) \([tf]\) \([tf]\).*/\1 \2 \3/p')"
check "clock step 1 s: waited out (within max_rewind_wait), then a larger id" "t t" \
  "$(echo "$res" | sed -n 's/^RESULT [tf] [tf] [tf] \([tf]\) \([tf]\).*/\1 \2/p')"
check "clock step 1 h: refused at once with 58000 (snowflake, uuidv7)" "58000 58000 t" \
  "$(echo "$(echo "$res" | sed -n 's/^SNOWFLAKE_1H //p') $(echo "$res" | sed -n 's/^UUID_1H //p') $(echo "$res" | sed -n 's/^RESULT.* \([tf]\)$/\1/p')")"
check "clock back to normal: ids continue above everything issued before" "t|t" "$(echo "$res" | tail -n 1)"
check "statistics saw the clock step back" "t" \
  "$(q -c "SELECT clock_backsteps >= 2 AND max_backstep_ms >= 3500000 AND errors >= 1 AND waits >= 1 FROM snowflake_id_stats WHERE shard = 5")"

# --- 1. Kill a backend in the middle of a generation storm ------------------------------------
log "faults: kill -9 a backend during a generation storm"
rm -f "$OUT"/storm_*.txt
storm() { # storm CLIENT FILE: one long-lived session generating until it fails, 60 s at most
  local stop=$((SECONDS + 60))
  while [ "$SECONDS" -lt "$stop" ]; do
    echo "SELECT snowflake_next(3), uuidv7_next() FROM generate_series(1, 2000);"
  done | psql -X -q -A -t -v ON_ERROR_STOP=1 -d sfid_cluster >>"$2" 2>/dev/null || true
}
for c in 1 2 3 4; do storm "$c" "$OUT/storm_$c.txt" & done
sleep 1.5
victim=""
for _ in $(seq 1 100); do
  victim="$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND query LIKE '%snowflake_next(3)%' AND pid <> pg_backend_pid() LIMIT 1")"
  [ -n "$victim" ] && break
  sleep 0.05
done
killed_at="$EPOCHREALTIME"
if [ -n "$victim" ]; then kill -9 "$victim"; else fail "kill -9: found no storm backend to kill"; fi
wait
wait_ready || fail "the cluster did not come back after the crash"
check "kill -9: the postmaster restarted the cluster" "t" \
  "$(grep -q "was terminated by signal 9" "$LOG" && echo t || echo f)"
cat "$OUT"/storm_*.txt | grep -v '^$' | pad_ids >"$OUT/pre.txt"
check "kill -9: the storm produced ids before the crash" "t" "$([ "$(wc -l <"$OUT/pre.txt")" -ge 1000 ] && echo t || echo f)"
# Without the reservation the restarted generators would start at the clock, and the clock
# moves on during a restart: step it back, for the first session after the crash, by the time
# the restart took plus 2 s, with a rewind wait long enough to wait it out. Only the reservation
# then keeps the new ids above the old.
server_set snowflake_id.max_rewind_wait 20s
back_ms="$(awk -v a="$killed_at" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 + 2000 }')"
echo "  the first session after the crash runs with the clock $back_ms ms behind"
q -c "SET snowflake_id.debug_clock_offset = -$back_ms" -c "SELECT snowflake_next(3), uuidv7_next() FROM generate_series(1, 5000)" | pad_ids >"$OUT/post.txt"
server_reset snowflake_id.max_rewind_wait
check "kill -9: generation resumed after the restart" "5000" "$(wc -l <"$OUT/post.txt")"
check "kill -9: no snowflake id or UUID repeats across the crash" "0" \
  "$( { cut -d'|' -f1 "$OUT/pre.txt" "$OUT/post.txt" | sort | uniq -d; cut -d'|' -f2 "$OUT/pre.txt" "$OUT/post.txt" | sort | uniq -d; } | wc -l)"
check "kill -9: every id after the crash is above every id before it" "t t" \
  "$( [ "$(cut -d'|' -f1 "$OUT/post.txt" | sort | head -n 1)" \> "$(cut -d'|' -f1 "$OUT/pre.txt" | sort | tail -n 1)" ] && echo t || echo f) $( [ "$(cut -d'|' -f2 "$OUT/post.txt" | sort | head -n 1)" \> "$(cut -d'|' -f2 "$OUT/pre.txt" | sort | tail -n 1)" ] && echo t || echo f)"

# --- 2. Stop hard, then start with the clock 10 s behind ----------------------------------------
log "faults: pg_ctl stop -m immediate during load, restart with the clock 10 s behind"
rm -f "$OUT"/storm_*.txt
for c in 1 2; do storm "$c" "$OUT/storm_$c.txt" & done
sleep 1.5
pg_ctl_ -m immediate stop
wait
cat "$OUT"/storm_*.txt | grep -v '^$' | pad_ids >"$OUT/pre.txt"
reserved="$(as_postgres cat "$DATA/snowflake_id.state" | sed -n 's/.*"reserved_until_unix_ms": \([0-9]*\).*/\1/p' | sort -n | tail -n 1)"
echo "  ids before the stop: $(wc -l <"$OUT/pre.txt"); reservation on disk: $reserved"
check "stop -m immediate: the load produced ids before the stop" "t" "$([ "$(wc -l <"$OUT/pre.txt")" -ge 1000 ] && echo t || echo f)"
set_fault_conf "snowflake_id.debug_clock_offset = -10000"
pg_ctl_ start
check "restart, clock 10 s behind: snowflake_next refuses with 58000 (longer than max_rewind_wait)" "58000" \
  "$(sqlstate "SELECT snowflake_next(3)")"
check "restart, clock 10 s behind: uuidv7_next refuses with 58000" "58000" "$(sqlstate "SELECT uuidv7_next()")"
# The step is 10 s plus the reservation's lead, less the time the restart took.
step_ms="$( { psql -X -d sfid_cluster -c "SELECT snowflake_next(3)" 2>&1 || true; } | sed -n 's/.*moved backwards by \([0-9]*\) ms.*/\1/p')"
check "restart, clock 10 s behind: the refusal names the size of the step (${step_ms:-none} ms)" "t" \
  "$([ "${step_ms:-0}" -ge 5000 ] && [ "${step_ms:-0}" -le 11000 ] && echo t || echo f)"
t0="$EPOCHREALTIME"
server_set snowflake_id.max_rewind_wait 20s
q -c "SELECT snowflake_next(3), uuidv7_next() FROM generate_series(1, 1000)" | pad_ids >"$OUT/post.txt"
server_reset snowflake_id.max_rewind_wait
elapsed="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
echo "  with max_rewind_wait = 20s the first call waited; 1,000 ids took ${elapsed}s"
check "restart, clock 10 s behind, max_rewind_wait 20 s: waits, then issues" "1000" "$(wc -l <"$OUT/post.txt")"
check "restart, clock 10 s behind: no id goes below the pre-crash maximum" "t t" \
  "$( [ "$(cut -d'|' -f1 "$OUT/post.txt" | sort | head -n 1)" \> "$(cut -d'|' -f1 "$OUT/pre.txt" | sort | tail -n 1)" ] && echo t || echo f) $( [ "$(cut -d'|' -f2 "$OUT/post.txt" | sort | head -n 1)" \> "$(cut -d'|' -f2 "$OUT/pre.txt" | sort | tail -n 1)" ] && echo t || echo f)"
set_fault_conf
pg_ctl_ -m fast restart

# --- 4. Sustained load: 8 clients, 10M ids, stats add up ----------------------------------------
total=$((LOAD_CLIENTS * LOAD_ROWS))
log "faults: sustained load, $LOAD_CLIENTS clients x $LOAD_ROWS rows = $total ids into one primary key"
# Unlogged: the test is about ids, and skipping WAL keeps it inside CI's time budget. Each
# client mints for its own shard (snowflake_id.default_shard, one of the server's).
server_set snowflake_id.shards "1-$LOAD_CLIENTS"
q -c "SELECT snowflake_id_stats_reset()" -c "CREATE UNLOGGED TABLE load_ids (id bigint PRIMARY KEY DEFAULT snowflake_next(), client int NOT NULL)" >/dev/null
per=$((LOAD_ROWS / 5))
tmpl="SET snowflake_id.default_shard = :c;"$'\n'
for b in 1 2 3 4 5; do tmpl+="INSERT INTO load_ids (client) SELECT :c FROM generate_series(1, $per);"$'\n'; done
if run_clients "$LOAD_CLIENTS" "$tmpl"; then
  pass "load: $LOAD_CLIENTS clients inserted with no error (no unique violation)"
else
  fail "load: a client failed (see the errors above)"
fi
check "load: $total rows, $total distinct ids" "$total|$total" "$(q -c "SELECT count(*), count(DISTINCT id) FROM load_ids")"
check "load: the statistics add up to the rows inserted" "$total|$LOAD_CLIENTS|0" \
  "$(q -c "SELECT sum(ids_issued), count(*), sum(errors) FROM snowflake_id_stats WHERE generator = 'snowflake'")"
check "load: each client's rows carry its own shard" "0" \
  "$(q -c "SELECT count(*) FROM load_ids WHERE snowflake_shard(id) <> client")"
q -c "SELECT shard, ids_issued, ahead_ticks, max_ahead_ms, waits, round(wait_ms) AS wait_ms FROM snowflake_id_stats ORDER BY shard" | sed 's/^/  /'
q -c "DROP TABLE load_ids" >/dev/null
server_reset snowflake_id.shards

# --- Promoted standby: move every generator past a point in time ---------------------------------
log "faults: snowflake_id_advance, for promoted standbys"
check "advance: refused to a plain user" "42501" "$(sqlstate "SET ROLE sf_plain" "SELECT snowflake_id_advance(now())")"
check "advance 3 s ahead: the next ids wait for the clock (58000 past max_rewind_wait)" "58000" \
  "$(sqlstate "SELECT snowflake_id_advance(clock_timestamp() + interval '3 s')" "SELECT snowflake_next(6)")"
server_set snowflake_id.max_rewind_wait 10s
check "advance: with a longer wait, the next ids are at or after the point (snowflake, uuidv7, reservation)" "t|t|t" \
  "$(q <<'SQL'
SELECT snowflake_id_advance(clock_timestamp() + interval '2 s') AS r, clock_timestamp() + interval '2 s' AS t \gset
SELECT snowflake_timestamp(snowflake_next(6)) >= date_trunc('milliseconds', :'t'::timestamptz) - interval '1 ms',
       uuidv7_timestamp(uuidv7_next()) >= date_trunc('milliseconds', :'t'::timestamptz) - interval '1 ms',
       :'r'::timestamptz > :'t'::timestamptz - interval '1 ms';
SQL
)"
server_reset snowflake_id.max_rewind_wait
check "advance: refused in a read-only transaction (25006)" "25006" \
  "$(sqlstate "BEGIN READ ONLY" "SELECT snowflake_id_advance(now())")"
# The refusal comes before the time is judged: 'infinity' cannot be converted (22008, the control
# below), but a read-only transaction is told what it can do about it first.
check "advance: 'infinity' cannot be converted in a read-write transaction (22008)" "22008" \
  "$(sqlstate "SELECT snowflake_id_advance('infinity')")"
check "advance: refused in a read-only transaction before its time is judged (25006)" "25006" \
  "$(sqlstate "BEGIN READ ONLY" "SELECT snowflake_id_advance('infinity')")"

# --- A hot standby: shares the primary's shards, so it must not mint ------------------------------
log "faults: a hot standby refuses to mint; promoted, it mints above the primary's ids"
q -c "DROP TABLE IF EXISTS conc, ks, uconc, upk, rpk, src" >/dev/null
SB="$SNOWFLAKE_RUN_DIR/$NAME-standby" SB_PORT=$((PORT + 100))
$SUDO rm -rf "$SB" && $SUDO install -d -o postgres -g postgres -m 0700 "$SB"
as_postgres "$(pg_bin "$V")/pg_basebackup" -h "$PGHOST" -p "$PGPORT" -U postgres -D "$SB/data" -R -X stream -c fast
# pg_basebackup 16+ writes connection options (sslcertmode, sslnegotiation, ...) into
# primary_conninfo that the wheel's walreceiver rejects here (its libpq resolves to Debian's
# older libpq5): without a plain one the standby would never stream, and the test would prove
# nothing.
as_postgres sed -i "s|^primary_conninfo = .*|primary_conninfo = 'host=$PGHOST port=$PGPORT user=postgres'|" "$SB/data/postgresql.auto.conf"
# The standby's clock runs 2 s behind the primary's (the debug offset), and it may wait 5 s for
# a clock behind its ids: with nothing but its own clock and the reservation file of the base
# backup, the promoted server would mint below ids the old primary issued after the backup.
printf "port = %s\nunix_socket_directories = '%s'\nsnowflake_id.debug_clock_offset = -2000\nsnowflake_id.max_rewind_wait = '5s'\n" \
  "$SB_PORT" "$SB" | as_postgres tee -a "$SB/data/postgresql.conf" >/dev/null
as_postgres "$(pg_bin "$V")/pg_ctl" -D "$SB/data" -l "$SB/server.log" -w -t 60 start >/dev/null
sleep 1.5 # past the reservation the base backup copied (it reaches 0.5 s past its write)
primary_max="$(q -c "SELECT max(x) FROM (SELECT snowflake_next(1) x FROM generate_series(1, 1000)) s")"
primary_lsn="$(q -c "SELECT pg_current_wal_flush_lsn()")"
sbq() { psql -X -q -A -t -h "$SB" -p "$SB_PORT" -d sfid_cluster "$@"; }
# What reached the standby is what counts: wait (a few ms) until it has received the primary's
# WAL up to now, which holds the reservation those ids were issued under.
for _ in $(seq 1 100); do
  [ "$(sbq -c "SELECT coalesce(pg_last_wal_receive_lsn() >= '$primary_lsn', false)")" = t ] && break
  sleep 0.05
done
check "standby: it streams from the primary (received its WAL)" "t" \
  "$(sbq -c "SELECT coalesce(pg_last_wal_receive_lsn() >= '$primary_lsn', false)")"
check "standby: snowflake_next refuses with 25006" "25006" "$(PGHOST="$SB" PGPORT="$SB_PORT" sqlstate "SELECT snowflake_next(1)")"
check "standby: uuidv7_next refuses with 25006" "25006" "$(PGHOST="$SB" PGPORT="$SB_PORT" sqlstate "SELECT uuidv7_next()")"
check "standby: snowflake_id_advance refuses with 25006, whatever the time" "25006 25006" \
  "$(PGHOST="$SB" PGPORT="$SB_PORT" sqlstate "SELECT snowflake_id_advance(now())") \
$(PGHOST="$SB" PGPORT="$SB_PORT" sqlstate "SELECT snowflake_id_advance('infinity')")"
check "standby: the readers work" "1" "$(sbq -c "SELECT snowflake_shard($primary_max)")"
as_postgres "$(pg_bin "$V")/pg_ctl" -D "$SB/data" -w -t 60 promote >/dev/null
# Those ids were handed out by a SELECT and stored nowhere, so the first-mint scan cannot see
# them: only the reservation the standby replayed from the WAL (15+) puts new ids above them.
# PostgreSQL 14 has no custom WAL resource managers, and the README's manual step is needed.
if [ "$V" -ge 15 ]; then
  check "promoted, clock 2 s behind, no manual step: shard 2's next id is above ids the old primary handed out unstored" "t" \
    "$(sbq -c "SELECT snowflake_next(2) > $primary_max")"
else
  check "promoted on 14, clock 2 s behind: without an advance, shard 2's next id lies below the old primary's ids" "t" \
    "$(sbq -c "SELECT snowflake_next(2) < $primary_max")"
fi
check "promoted: after snowflake_id_advance, new ids are above the old primary's" "t" \
  "$(sbq -c "SELECT snowflake_id_advance(now() + interval '1 s') IS NOT NULL" -c "SELECT snowflake_next(1) > $primary_max" | tail -n 1)"
as_postgres "$(pg_bin "$V")/pg_ctl" -D "$SB/data" -w -t 60 -m fast stop >/dev/null
$SUDO rm -rf "$SB"
