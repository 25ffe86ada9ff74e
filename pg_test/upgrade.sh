# Extension upgrades, sourced by pg_test/run.sh with a running preloaded cluster and the helpers
# pass, fail and check. For every earlier release kept in pg_test/upgrade/pgNN/: install it,
# ALTER EXTENSION snowflake_id UPDATE, and compare the catalog with a fresh install of the
# current version (pg_test/upgrade/catalog.sql). They must be identical.
current="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/Cargo.toml" | head -n 1)"
extdir="$("$(pg_bin "$V")/pg_config" --sharedir)/extension"
old_scripts=("$REPO_ROOT/pg_test/upgrade/pg$V"/snowflake_id--*.sql)
if [ ! -e "${old_scripts[0]}" ]; then
  fail "extension upgrade: no earlier release's install script for PostgreSQL $V in pg_test/upgrade/pg$V"
else
  psql -X -q -c "DROP DATABASE IF EXISTS sfid_fresh" -c "CREATE DATABASE sfid_fresh" >/dev/null
  psql -X -q -d sfid_fresh -c "CREATE EXTENSION snowflake_id" >/dev/null
  psql -X -q -A -t -v ON_ERROR_STOP=1 -d sfid_fresh -f "$REPO_ROOT/pg_test/upgrade/catalog.sql" >"$OUT/catalog-fresh.txt" \
    || fail "extension upgrade: the catalog query failed"
  check "extension upgrade: a fresh install is version $current" "$current" \
    "$(psql -X -q -A -t -d sfid_fresh -c "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")"
  for script in "${old_scripts[@]}"; do
    from="$(basename "$script" .sql)" from="${from#snowflake_id--}"
    log "extension upgrade: $from -> $current on PostgreSQL $V"
    # The old install script is a test fixture: put it beside the current one for the test only.
    $SUDO install -m 0644 "$script" "$extdir/"
    psql -X -q -c "DROP DATABASE IF EXISTS sfid_upgraded" -c "CREATE DATABASE sfid_upgraded" >/dev/null
    # 0.3.0 left a floor at '-infinity' ("nothing minted") where its first write failed: the
    # update must make it unknown and leave a known floor as it was. The second row goes before
    # the catalog comparison, which counts the record's rows.
    seed=() space=snowflake_id_private.snowflake_id_space
    if [ "$from" = 0.3.0 ]; then
      seed=(-c "UPDATE $space SET minted_before = '-infinity'"
        -c "INSERT INTO $space SELECT layout, epoch, recorded_at - interval '1 day', '2026-01-01 00:00:00+00' FROM $space")
    fi
    if psql -X -q -v ON_ERROR_STOP=1 -d sfid_upgraded -c "CREATE EXTENSION snowflake_id VERSION '$from'" "${seed[@]}" \
        -c "ALTER EXTENSION snowflake_id UPDATE" >"$OUT/upgrade-$from.log" 2>&1; then
      pass "extension upgrade: $from installs and updates to $current"
    else
      cat "$OUT/upgrade-$from.log"
      fail "extension upgrade: $from did not install and update"
    fi
    if [ "$from" = 0.3.0 ]; then
      check "extension upgrade: 0.3.0's '-infinity' floor is unknown after the update, a known one kept" \
        "infinity,2026-01-01 00:00:00+00" \
        "$(psql -X -q -A -t -d sfid_upgraded -c "SET TimeZone = UTC" \
          -c "SELECT string_agg(minted_before::text, ',' ORDER BY recorded_at DESC) FROM $space" \
          -c "DELETE FROM $space WHERE minted_before <> 'infinity'")"
    fi
    $SUDO rm -f "$extdir/$(basename "$script")"
    psql -X -q -A -t -v ON_ERROR_STOP=1 -d sfid_upgraded -f "$REPO_ROOT/pg_test/upgrade/catalog.sql" >"$OUT/catalog-from-$from.txt" \
      || fail "extension upgrade: the catalog query failed"
    # A fresh install owns at least its functions and the statistics view: an empty description
    # would make the comparison meaningless.
    if [ "$(grep -c '^function ' "$OUT/catalog-fresh.txt")" -lt 15 ]; then
      fail "extension upgrade: the fresh catalog lists only $(grep -c '^function ' "$OUT/catalog-fresh.txt") functions"
    elif diff -u "$OUT/catalog-fresh.txt" "$OUT/catalog-from-$from.txt" >"$OUT/catalog-$from.diff"; then
      pass "extension upgrade: $from updated to $current has the catalog of a fresh install ($(wc -l <"$OUT/catalog-fresh.txt") objects)"
    else
      cat "$OUT/catalog-$from.diff"
      fail "extension upgrade: $from updated to $current differs from a fresh install"
    fi
    check "extension upgrade: the updated generators mint" "t" \
      "$(psql -X -q -A -t -d sfid_upgraded -c "SELECT snowflake_next(1) > 0 AND uuidv7_next() IS NOT NULL")"
  done
  psql -X -q -c "DROP DATABASE sfid_upgraded" -c "DROP DATABASE sfid_fresh" >/dev/null
fi
