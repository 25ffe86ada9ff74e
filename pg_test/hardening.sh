# Hardening tests against a real cluster, sourced by pg_test/run.sh after faults.sh (same helpers:
# q, check, pass, fail, sqlstate, pg_ctl_, wait_ready, server_set, server_reset). No setting,
# input or file any role can reach takes the server down or makes another session fail.

# --- Bounded input: no allocation a caller controls can abort a backend ---------------------------
log "hardening: a 300 MB layout under a virtual-memory limit"
# The postmaster and every backend get at most 2 GiB of address space: a 300 MB text fits, but
# parsing that splits it into a vector of 300M slices (4.8 GB) would fail to allocate, and a
# failed Rust allocation aborts the backend, which restarts every session of the server.
pg_ctl_ -m fast stop
as_postgres bash -c "ulimit -v 2097152 && exec '$(pg_bin "$V")/pg_ctl' -D '$DATA' -l '$LOG' -w -t 60 start" >/dev/null
pm_before="$(as_postgres head -n 1 "$DATA/postmaster.pid")"
log_lines_before="$(wc -l <"$LOG")"
check "a 300 MB layout is refused with 22023 under a 2 GiB limit" "22023" \
  "$(sqlstate "SELECT * FROM snowflake_layout(repeat('/', 300000000))")"
check "a long epoch-like layout is refused with 22023" "22023" "$(sqlstate "SELECT * FROM snowflake_layout(repeat('9', 100000))")"
msg="$( { psql -X -d sfid_cluster -c "SELECT * FROM snowflake_layout(repeat('x', 1000000))" 2>&1 || true; } | wc -c)"
check "the refusal quotes a short prefix only (${msg} bytes of message)" "t" "$([ "$msg" -lt 600 ] && echo t || echo f)"
# A 16 MB array of 134,217,727 NULLs: converted to a vector of strings before its length was looked
# at (issue 31), it took 3.2 GB. Its length is now read from its header, with the server's setting
# on or off; so is the length of each connection string.
# Another session lives through it all: a restart of the server would end it.
psql -X -q -d sfid_cluster -c "SELECT pg_sleep(3)" >/dev/null 2>&1 &
bystander=$!
huge="SELECT * FROM snowflake_fleet_check(array_fill(NULL::text, ARRAY[134217727]))"
check "a fleet check of 134,217,727 NULL peers is refused with 54000 under a 2 GiB limit" "54000" "$(sqlstate "$huge")"
check "one connection string of 9 kB is refused with 54000" "54000" \
  "$(sqlstate "SELECT * FROM snowflake_fleet_check(ARRAY['host=a ' || repeat('x', 9000)])")"
server_set snowflake_id.fleet_connections off
check "with fleet_connections off, the huge array is refused with 55000, unconverted" "55000" "$(sqlstate "$huge")"
server_reset snowflake_id.fleet_connections
bystander_rc=0
wait "$bystander" || bystander_rc=$?
check "a session that ran beside them all finished (the server never restarted)" "0" "$bystander_rc"
check "the same postmaster still runs, and no backend died" "$pm_before|clean" \
  "$(as_postgres head -n 1 "$DATA/postmaster.pid")|$(tail -n +"$((log_lines_before + 1))" "$LOG" | grep -Eq "terminated by signal|was terminated|PANIC" && echo dirty || echo clean)"
pg_ctl_ -m fast restart

log "hardening: text in a database that is not UTF-8"
psql -X -q -c "CREATE DATABASE sfid_latin1 TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'" >/dev/null
psql -X -q -d sfid_latin1 -c "CREATE EXTENSION snowflake_id" >/dev/null
check "a non-ASCII layout in a LATIN1 database is refused with 22023, not a panic" "22023" \
  "$(PGCLIENTENCODING=UTF8 psql -X -q -A -t -d sfid_latin1 -v ON_ERROR_STOP=0 -c "SELECT * FROM snowflake_layout('41/13/9é')" -c "\\echo :LAST_ERROR_SQLSTATE" 2>/dev/null | tail -n 1)"
check "an ASCII layout works there" "41/10/12" \
  "$(psql -X -q -A -t -d sfid_latin1 -c "SELECT layout FROM snowflake_layout('twitter')")"
psql -X -q -c "DROP DATABASE sfid_latin1" >/dev/null

# --- One session's lead cannot make another session wait or fail --------------------------------
log "hardening: the lead is the server's, not a session's"
# probe SECONDS: one id at a time on shard 20 for SECONDS: "errors|worst call ms|most ms ahead",
# the last being how far the tick of its ids ran ahead of the clock read after the call. The
# worst call is printed, never judged: a busy machine can stall any call.
q -c "CREATE OR REPLACE FUNCTION public.sf_probe(seconds float8) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz; worst interval := '0'; ahead interval := '-1 day'; errs int := 0; id bigint;
        stop timestamptz := clock_timestamp() + seconds * interval '1 s';
BEGIN
  WHILE clock_timestamp() < stop LOOP
    t0 := clock_timestamp();
    BEGIN
      id := snowflake_next(20);
      ahead := greatest(ahead, snowflake_timestamp(id) - clock_timestamp());
    EXCEPTION WHEN OTHERS THEN errs := errs + 1; END;
    worst := greatest(worst, clock_timestamp() - t0);
    PERFORM pg_sleep(0.002);
  END LOOP;
  RETURN errs || '|' || round(extract(epoch FROM worst) * 1000) || '|' || round(extract(epoch FROM ahead) * 1000);
END \$\$" >/dev/null
# sf_rate(): how long one session takes to mint 100,000 ids, in ms: whether this machine mints fast
# enough for a load to run ahead of the clock at all. Spread over 64 shards (about 1,600 ids, 3
# ticks, each), so that no lead the server may have makes it wait: it measures the machine, never
# the mechanism the checks below judge.
q -c "CREATE OR REPLACE FUNCTION public.sf_rate() RETURNS int LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  PERFORM count(snowflake_next(100 + g % 64)) FROM generate_series(1, 100000) g;
  RETURN round(extract(epoch FROM clock_timestamp() - t0) * 1000);
END \$\$" >/dev/null
# bulk SECONDS [ROWS]: batches of ROWS ids (200,000 by default) on shard 20, one every 0.2 s, for
# SECONDS, having tried to raise its own lead (refused: a server setting).
bulk() {
  local stop=$((SECONDS + $1)) rows="${2:-200000}"
  {
    echo "\\set ON_ERROR_STOP 0"
    echo "SET snowflake_id.max_lead = '1s';"
    while [ "$SECONDS" -lt "$stop" ]; do echo "SELECT count(snowflake_next(20)) FROM generate_series(1, $rows);"; sleep 0.2; done
  } | psql -X -q -A -t -d sfid_cluster >/dev/null 2>&1
}
check "a session cannot SET the lead: it is the server's (55P02)" "55P02" "$(sqlstate "SET snowflake_id.max_lead = '1s'")"
q -c "SELECT snowflake_id_stats_reset()" >/dev/null
bulk 5 &
sleep 1
probe="$(q -c "SELECT sf_probe(3)")"
wait
echo "  a default session beside a bulk load that tried a 1 s lead: errors|worst call ms|most ms ahead = $probe"
# A bulk load that mints more than 512 ids a millisecond on shard 20 runs ahead of the clock, so a
# lead it could raise would show as ids far ahead, which the other session would then wait out.
# The generator itself records the most any id ran ahead. (On a machine too slow to run ahead this
# cannot fail; the 55P02 check above still holds.)
check "a session's own SET of max_lead cannot run the shard further ahead than the server's 5 ms" "t" \
  "$(q -c "SELECT max_ahead_ms <= 5 FROM snowflake_id_stats WHERE shard = 20")"
check "a session beside the bulk load never fails" "0" "${probe%%|*}"
# Through the server setting: everyone may run ahead up to 1 s. Batches of 100,000 (195 ms of
# ticks) every 0.2 s keep the load well inside that lead, so neither it nor the session beside it
# ever waits for the clock: the shard's wait counter must stay 0, while its ids run far ahead.
# Only on a machine that mints fast enough for the load to run 50 ms ahead with room to spare
# (100,000 ids within 120 ms leaves it 75 ms ahead); elsewhere the check is skipped, never failed.
server_set snowflake_id.max_lead 1s
rate_ms="$(q -c "SELECT sf_rate()")"
q -c "SELECT snowflake_id_stats_reset()" >/dev/null
bulk 4 100000 &
sleep 1
probe_same="$(q -c "SELECT sf_probe(2)")"
shared="$(q -c "SELECT waits || '|' || max_ahead_ms FROM snowflake_id_stats WHERE shard = 20")"
wait
echo "  with max_lead = 1s for the server: $probe_same; 100,000 ids took $rate_ms ms; waits|most ms ahead on the shard: $shared"
check "server max_lead 1 s: a session beside the bulk load never fails" "0" "${probe_same%%|*}"
if [ "$rate_ms" -lt 120 ]; then
  check "server max_lead 1 s: the shard runs more than 50 ms ahead, and no call waits for the clock" "t" \
    "$(awk -F'|' '{ print ($1 == 0 && $2 > 50) ? "t" : "f" }' <<<"$shared")"
else
  log "skip: 100,000 ids took $rate_ms ms here, too slow for a load to run 50 ms ahead of the clock"
fi
# Then the lead is lowered at reload while the generator runs up to 1 s ahead. Waiting for the
# clock is then a catch-up, never a step back.
bulk 6 &
sleep 2
server_reset snowflake_id.max_lead
probe_lowered="$(q -c "SELECT sf_probe(2)")"
wait
echo "  right after lowering the lead to 5 ms: $probe_lowered"
check "lead lowered while ahead: no call fails" "0" "${probe_lowered%%|*}"
check "lead lowered while ahead: waiting for the clock is not counted as a clock step back" "0|0" \
  "$(q -c "SELECT clock_backsteps, errors FROM snowflake_id_stats WHERE shard = 20")"
q -c "DROP FUNCTION public.sf_probe(float8)" -c "DROP FUNCTION public.sf_rate()" >/dev/null

# --- Privileges ---------------------------------------------------------------------------------
log "hardening: privileges"
q -c "DO \$\$ BEGIN CREATE ROLE sf_mon LOGIN IN ROLE pg_monitor; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$" >/dev/null
check "a plain role mints (the generators are PUBLIC, as gen_random_uuid() is)" "t|t" \
  "$(q -c "SET ROLE sf_plain" -c "SELECT snowflake_next(1) > 0, uuidv7_next() IS NOT NULL")"
check "a plain role cannot read the cluster-wide statistics (view, function)" "42501 42501" \
  "$(sqlstate "SET ROLE sf_plain" "SELECT count(*) FROM snowflake_id_stats") $(sqlstate "SET ROLE sf_plain" "SELECT count(*) FROM snowflake_id_stats()")"
check "pg_monitor reads them" "ok" "$(sqlstate "SET ROLE sf_mon" "SELECT count(*) FROM snowflake_id_stats")"
check "a plain role cannot reset them or advance the generators" "42501 42501" \
  "$(sqlstate "SET ROLE sf_plain" "SELECT snowflake_id_stats_reset()") $(sqlstate "SET ROLE sf_plain" "SELECT snowflake_id_advance(now())")"

# --- The reservation file: never a reason for the server to stop ------------------------------------
STATE="$DATA/snowflake_id.state"
FIX="$SNOWFLAKE_RUN_DIR/$NAME-fixtures" # files the postgres user writes and reads back
$SUDO rm -rf "$FIX" && $SUDO install -d -o postgres -g postgres -m 0700 "$FIX"
as_postgres cp "$STATE" "$FIX/state.good"
# restart_with CONTENT: stops the server, writes CONTENT (a file name, or "empty") over the
# reservation file, starts it again; returns non-zero if the server did not start.
restart_with() {
  pg_ctl_ -m fast stop
  case "$1" in
    empty) as_postgres truncate -s 0 "$STATE" ;;
    *) as_postgres cp "$1" "$STATE" ;;
  esac
  pg_ctl_ start
}
good_id="$(q -c "SELECT snowflake_next(1)")"
printf '{"format": 1, "reserved_until_unix_ms": 17' | as_postgres tee "$FIX/state.truncated" >/dev/null
head -c 100 /dev/urandom | as_postgres tee "$FIX/state.garbage" >/dev/null
# Another layout's file, as a version before 0.3.0 wrote it (no checksum: an edited file with one
# would be refused as damaged).
as_postgres head -c 512 "$FIX/state.good" \
  | sed -e '/"sequence"/d' -e '/"checksum"/d' -e 's/\("written_at_unix_ms": [0-9]*\),/\1/' -e 's/  *$//' \
  | as_postgres tee "$FIX/state.v020" >/dev/null
as_postgres sed 's/"41\/13\/9"/"41\/10\/12"/' "$FIX/state.v020" | as_postgres tee "$FIX/state.otherlayout" >/dev/null
for case in empty:XX001 "$FIX/state.truncated":XX001 "$FIX/state.garbage":XX001 "$FIX/state.otherlayout":55000; do
  file="${case%:*}" want="${case##*:}" label="$(basename "${case%:*}")"
  log "hardening: a reservation file that is ${label#state.}"
  before="$(wc -l <"$LOG")"
  if restart_with "$file"; then pass "${label#state.} file: the server starts"; else fail "${label#state.} file: the server did not start"; fi
  check "${label#state.} file: the start logs a WARNING naming the file" "t" \
    "$(tail -n +"$((before + 1))" "$LOG" | grep -q 'WARNING:.*generators are disabled: the reservation file "snowflake_id.state"' && echo t || echo f)"
  check "${label#state.} file: snowflake_next and uuidv7_next refuse with $want" "$want $want" \
    "$(sqlstate "SELECT snowflake_next(1)") $(sqlstate "SELECT uuidv7_next()")"
  check "${label#state.} file: the readers and the statistics keep working" "1|t" \
    "$(q -c "SELECT snowflake_shard($good_id), count(*) >= 0 FROM snowflake_id_stats")"
done
# Another layout's file is never replaced by an advance; removing it on purpose starts afresh.
check "other-layout file: snowflake_id_advance refuses to replace it (55000)" "55000" \
  "$(sqlstate "SELECT snowflake_id_advance(now())")"
as_postgres rm "$STATE"
check "other-layout file removed on purpose: the next call mints again, with no restart" "ok" "$(sqlstate "SELECT snowflake_next(1)")"
# A damaged file is replaced by an advance to a point past every id issued. Removing it is no
# way out: the clock alone could repeat ids the file covered.
restart_with "$FIX/state.garbage" || fail "garbage file: the server did not start"
as_postgres rm "$STATE"
check "damaged file removed: the generators still refuse (XX001)" "XX001" "$(sqlstate "SELECT snowflake_next(1)")"
check "damaged file: snowflake_id_advance(now()) replaces it and the generators mint above the old ids" "t" \
  "$(q -c "SELECT snowflake_id_advance(now()) IS NOT NULL" -c "SELECT snowflake_next(1) > $good_id" | tail -n 1)"
check "damaged file: the replacement is a valid reservation again" "t" \
  "$(as_postgres grep -q '"reserved_until_unix_ms"' "$STATE" && echo t || echo f)"
# An unreadable file, then a crash restart with a damaged one.
pg_ctl_ -m fast stop
as_postgres chmod 000 "$STATE"
pg_ctl_ start && pass "unreadable file: the server starts" || fail "unreadable file: the server did not start"
check "unreadable file: the generators refuse with 58030" "58030" "$(sqlstate "SELECT snowflake_next(1)")"
as_postgres chmod 600 "$STATE"
check "unreadable file made readable: the next call mints again, above the old ids" "t" \
  "$(q -c "SELECT snowflake_next(1) > $good_id")"
log "hardening: a damaged reservation file at a crash restart"
last_id="$(q -c "SELECT snowflake_next(1)")"
as_postgres cp "$FIX/state.garbage" "$STATE"
psql -X -q -d sfid_cluster -c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
sleep 0.5
victim="$(q -c "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%' LIMIT 1")"
kill -9 "$victim"
wait
wait_ready && pass "crash restart with a damaged file: the server is back" || fail "crash restart with a damaged file: the server did not come back"
if [ "$V" -ge 15 ]; then
  # The crash recovery replays the reservations logged since the last checkpoint (crate::runtime::wal):
  # the last one covers every id issued, so it replaces the damaged file.
  check "crash restart with a damaged file: the reservation replayed from the WAL replaces it, ids continue above the old ones" "t|t" \
    "$(q -c "SELECT snowflake_next(1) > $last_id")|$(grep -q "was replaced with a reservation replayed from the WAL" "$LOG" && echo t || echo f)"
else
  check "crash restart with a damaged file: the generators refuse (XX001), the readers work" "XX001|1" \
    "$(sqlstate "SELECT snowflake_next(1)")|$(q -c "SELECT snowflake_shard($good_id)")"
fi
as_postgres cp "$FIX/state.good" "$STATE"
pg_ctl_ -m fast restart
before_start="$(as_postgres stat -c %i "$STATE")"
check "the original file back: minting resumes" "ok" "$(sqlstate "SELECT snowflake_next(1)")"

log "hardening: writing the reservation file in place, or replacing it"
# The first write of a run replaces the file whole: what the page cache shows after a restart
# may not be on disk, and a slot chosen from it could be the only durable one.
inode="$(as_postgres stat -c %i "$STATE")"
check "the first write after a start replaces the file (a new inode)" "t" "$([ "$inode" != "$before_start" ] && echo t || echo f)"
q -c "SELECT snowflake_id_advance(clock_timestamp() + interval '1.5 s') IS NOT NULL" >/dev/null
check "a renewal overwrites the file in place (same inode, 1024 bytes: two slots, one fdatasync)" "$inode 1024" \
  "$(as_postgres stat -c '%i %s' "$STATE")"
# A file linked from elsewhere (a backup made with cp -al) is replaced, never written through.
as_postgres ln -f "$STATE" "$FIX/state.linked"
linked="$(as_postgres cat "$FIX/state.linked")"
sleep 2 # the clock past that reservation: the next advance writes the file, and ends as near the clock
q -c "SELECT snowflake_id_advance(clock_timestamp() + interval '1.5 s') IS NOT NULL" >/dev/null
check "a file with another link is replaced: the linked copy is untouched" "t|1" \
  "$([ "$(as_postgres cat "$FIX/state.linked")" = "$linked" ] && echo t || echo f)|$(as_postgres stat -c %h "$STATE")"
log "hardening: the reservation's temporary file"
# A file as versions before 0.3.0 wrote it (one document) is replaced through the temporary file.
as_postgres cp "$FIX/state.v020" "$STATE"
as_postgres rm -f "$DATA/snowflake_id.state.tmp"
as_postgres ln -s "$FIX/victim" "$DATA/snowflake_id.state.tmp"
echo untouched | as_postgres tee "$FIX/victim" >/dev/null
writes_before="$(q -c "SELECT writes FROM snowflake_id_reservation()")"
# 1.5 s ahead, 2 s later: past the current reservation, so the file is written.
sleep 2
q -c "SELECT snowflake_id_advance(clock_timestamp() + interval '1.5 s') IS NOT NULL" >/dev/null
check "a link in place of the temporary file is removed, not written through; the file is 0600, 1024 bytes" "t|untouched|600 1024" \
  "$(q -c "SELECT writes > $writes_before FROM snowflake_id_reservation()")|$(as_postgres cat "$FIX/victim")|$(as_postgres stat -c '%a %s' "$STATE")"

log "hardening: a missing file, a clock before the epoch, a reservation far ahead"
pg_ctl_ -m fast stop
as_postgres mv "$STATE" "$FIX/state.saved"
before="$(wc -l <"$LOG")"
pg_ctl_ start
check "a missing file: the start says so in a LOG line" "t" \
  "$(tail -n +"$((before + 1))" "$LOG" | grep -q 'LOG:.*no reservation file "snowflake_id.state"' && echo t || echo f)"
pg_ctl_ -m fast stop
as_postgres mv "$FIX/state.saved" "$STATE"
if command -v faketime >/dev/null; then
  before="$(wc -l <"$LOG")"
  # libfaketime starts the server's clock at 2024-06-01, before the default epoch (2025-01-01)
  # and 2.5 years behind the reservation.
  # pg_ctl hangs under a faked clock, so the postmaster alone gets libfaketime, and we poll.
  as_postgres env LD_PRELOAD="$(dpkg -L libfaketime | grep '/libfaketime\.so\.1$' | head -n 1)" FAKETIME="@2024-06-01 00:00:00" \
    "$(pg_bin "$V")/postgres" -D "$DATA" >>"$LOG" 2>&1 </dev/null &
  disown
  wait_ready && pass "clock before the epoch at boot: the server starts" || fail "clock before the epoch at boot: the server did not start"
  tail -n +"$((before + 1))" "$LOG" | grep -E "WARNING" | sed 's/^/  /' | head -n 4
  check "clock before the epoch at boot: WARNINGs for the epoch and the reservation far ahead" "t t" \
    "$(tail -n +"$((before + 1))" "$LOG" | grep -q 'WARNING:.*the clock reads before snowflake_id.epoch' && echo t || echo f) $(tail -n +"$((before + 1))" "$LOG" | grep -q 'WARNING:.*reservation lies [0-9]* s ahead of the clock' && echo t || echo f)"
  check "clock before the epoch: snowflake_next 22008, uuidv7_next 58000, the readers work" "22008 58000 1" \
    "$(sqlstate "SELECT snowflake_next(1)") $(sqlstate "SELECT uuidv7_next()") $(q -c "SELECT snowflake_shard($good_id)")"
  pg_ctl_ -m fast stop
  pg_ctl_ start
else
  fail "faketime is not installed (scripts/setup.sh installs it)"
  pg_ctl_ start
fi
check "after all that, minting works and stays above every earlier id" "t" "$(q -c "SELECT snowflake_next(1) > $good_id")"

log "hardening: a shard list that does not parse closes the fence"
echo "snowflake_id.shards = '0-99999'" | as_postgres tee -a "$DATA/postgresql.conf" >/dev/null
before="$(wc -l <"$LOG")"
pg_ctl_ -m fast restart
check "an invalid shard list at start: a WARNING, and every shard is refused (22023), not every shard open" "t 22023 ok" \
  "$(tail -n +"$((before + 1))" "$LOG" | grep -q 'WARNING:.*snowflake_id.shards is not a valid shard list' && echo t || echo f) $(sqlstate "SELECT snowflake_next(1)") $(sqlstate "SELECT uuidv7_next()")"
as_postgres sed -i "/^snowflake_id.shards = '0-99999'/d" "$DATA/postgresql.conf"
q -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.3
check "the shard list fixed and reloaded: the fence opens" "ok" "$(sqlstate "SELECT snowflake_next(1)")"

log "hardening: a restart far behind the reservation refuses at once, it does not hang"
q -c "SELECT snowflake_id_advance(clock_timestamp() + interval '30 s')" >/dev/null
pg_ctl_ -m fast restart
t0="$EPOCHREALTIME"
got="$(sqlstate "SELECT snowflake_next(1)") $(sqlstate "SELECT uuidv7_next()")"
took="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')"
check "30 s ahead after a restart: 58000 at once (${took} ms for both calls), not a 30 s wait" "58000 58000 t" \
  "$got $([ "$took" -lt 3000 ] && echo t || echo f)"
check "the refusal says the ids run ahead of the clock" "t" \
  "$( { psql -X -d sfid_cluster -c "SELECT snowflake_next(1)" 2>&1 || true; } | grep -q 'run [0-9]* ms ahead of the clock' && echo t || echo f)"
log "hardening: the key file of public ids"
# A secret for this run only; it must never show up anywhere a role or the log can read.
secret="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
KEYS="$DATA/snowflake_id.keys"
# keys MODE OWNER CONTENT: writes the key file with that mode and owner.
keys() { $SUDO rm -f "$KEYS"; printf '%s\n' "$3" | $SUDO tee "$KEYS" >/dev/null; $SUDO chown "$2" "$KEYS"; $SUDO chmod "$1" "$KEYS"; }
log_before="$(wc -l <"$LOG")"
keys 0600 postgres:postgres "1 $secret encode"
token="$(q -c "SELECT snowflake_to_public(12345)")"
check "a 0600 file owned by the server's user: tokens round-trip for a plain role" "12345" \
  "$(q -c "SET ROLE sf_plain" -c "SELECT snowflake_from_public('$token')")"
keys 0644 postgres:postgres "1 $secret encode"
check "readable by others (0644): refused with F0000 until fixed" "F0000" "$(sqlstate "SELECT snowflake_to_public(1)")"
keys 0640 postgres:postgres "1 $secret encode"
check "group-readable and owned by the server's user: refused" "F0000" "$(sqlstate "SELECT snowflake_from_public('$token')")"
keys 0640 root:postgres "1 $secret encode"
check "owned by root, group-readable (0640), as PostgreSQL allows for ssl_key_file: used" "12345" \
  "$(q -c "SELECT snowflake_from_public('$token')")"
keys 0644 root:postgres "1 $secret encode"
check "owned by root and world-readable: refused" "F0000" "$(sqlstate "SELECT snowflake_from_public('$token')")"
keys 0644 nobody:nogroup "1 $secret encode"
check "owned by another user: refused (F0000); unreadable to the server: 58030" "F0000 58030" \
  "$(sqlstate "SELECT snowflake_from_public('$token')") $($SUDO chmod 0600 "$KEYS"; sqlstate "SELECT snowflake_from_public('$token')")"
$SUDO rm -f "$KEYS"
check "no file: 55000" "55000" "$(sqlstate "SELECT snowflake_to_public(1)")"
as_postgres mkfifo -m 0600 "$KEYS"
t0="$EPOCHREALTIME"
got="$(sqlstate "SELECT snowflake_to_public(1)")"
took="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')"
check "a FIFO in its place: refused (F0000) in ${took} ms, never a blocked backend" "F0000 t" "$got $([ "$took" -lt 3000 ] && echo t || echo f)"
$SUDO rm -f "$KEYS"
keys 0600 postgres:postgres "$(head -c 20000 /dev/zero | tr '\0' '#')"
check "a 20 kB file: refused (F0000), nothing read past the limit" "F0000" "$(sqlstate "SELECT snowflake_to_public(1)")"
# A secret store (Kubernetes, Vault agent) mounts the file through a link: it is followed.
as_postgres bash -c "umask 077 && printf '1 %s encode\n' '$secret' > '$FIX/mounted.keys'"
$SUDO rm -f "$KEYS" && as_postgres ln -s "$FIX/mounted.keys" "$KEYS"
check "a link to a 0600 file: followed" "12345" "$(q -c "SELECT snowflake_from_public('$token')")"
$SUDO rm -f "$KEYS"
check "snowflake_id.public_keys_file elsewhere (ALTER SYSTEM, reload): used" "12345" \
  "$(server_set snowflake_id.public_keys_file "$FIX/mounted.keys"; q -c "SELECT snowflake_from_public('$token')")"
check "a session cannot point it elsewhere (55P02), a plain role cannot ALTER SYSTEM (42501) or SHOW it (42501)" "55P02 42501 42501" \
  "$(sqlstate "SET snowflake_id.public_keys_file = '/tmp/x'") $(sqlstate "SET ROLE sf_plain" "ALTER SYSTEM SET snowflake_id.public_keys_file = '/tmp/x'") $(sqlstate "SET ROLE sf_plain" "SELECT current_setting('snowflake_id.public_keys_file')")"
server_reset snowflake_id.public_keys_file
# A malformed line that holds the secret: the error names the line, never its content.
keys 0600 postgres:postgres "1 ${secret}0 encode"
msg="$( { psql -X -d sfid_cluster -c "SELECT snowflake_to_public(1)" 2>&1 || true; } )"
check "a malformed key line is reported by number, not quoted" "t f" \
  "$(grep -q 'line 1 has a key that is not 64 hexadecimal digits' <<<"$msg" && echo t || echo f) $(grep -q "${secret:0:16}" <<<"$msg" && echo t || echo f)"
keys 0600 postgres:postgres "1 $secret encode"
check "a plain role finds the secret in no setting, no file listing and no statistics it can read" "0|42501|42501|42501" \
  "$(q -c "SET ROLE sf_plain" -c "SELECT count(*) FROM pg_settings WHERE setting LIKE '%${secret:0:16}%' OR reset_val LIKE '%${secret:0:16}%'")|$(sqlstate "SET ROLE sf_plain" "SELECT count(*) FROM pg_file_settings")|$(sqlstate "SET ROLE sf_plain" "SELECT pg_read_file('snowflake_id.keys')")|$(sqlstate "SET ROLE sf_plain" "SELECT * FROM snowflake_public_keys()")"
check "pg_monitor sees versions and fingerprints, never the secret" "1|true|8" \
  "$(q -c "SET ROLE sf_mon" -c "SELECT version || '|' || encodes || '|' || length(fingerprint) FROM snowflake_public_keys()")"
check "nothing in the server log holds the secret" "0" "$(tail -n +"$((log_before + 1))" "$LOG" | grep -c "${secret:0:16}" || true)"
$SUDO rm -f "$KEYS"

# Leave a usable server behind: a new id space from the clock (nothing else uses these ids).
pg_ctl_ -m fast stop
as_postgres rm -f "$STATE"
pg_ctl_ start
$SUDO rm -rf "$FIX"
