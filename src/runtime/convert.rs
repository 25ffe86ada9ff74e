//! Converting existing key columns: the catalog reads, the locks, the stored ids' maximum, running
//! the plan and checking what it did. The rules, and the plan itself, are
//! `crate::core::convert`; the SQL functions are `crate::api::convert`.
//!
//! They are declared with `SET search_path = pg_catalog, pg_temp` and name every object
//! qualified, so that a caller's objects cannot stand in for the catalogs' or the extension's,
//! and with `SET row_security = off`, so that a row policy would make a query over a user's table
//! fail rather than miss rows (none runs: see below).
//!
//! **By OID.** The table is locked by OID, and everything read after that is read by OID: its
//! partitions and children (locked by OID too), its column's facts, and the stored ids, which are
//! read with PostgreSQL's own scans ([`stored_max`]), not a query. So no name is resolved again
//! once the table is locked, no query over the table is planned, and no code of any role runs: an
//! index scan reads the keys an index stores and never evaluates its expressions, and a row policy
//! does not apply below the query layer, so every row is seen. Only the plan's DDL names the table
//! and its objects, and a name can be made to point elsewhere while it runs (`ALTER SCHEMA …
//! RENAME` locks none of the tables in the schema): so once it ran, its effects on the column are
//! read by OID and checked ([`convert::check_converted`]), and a missing one is an error that rolls
//! back everything, what a statement did to another object included.
//!
//! **Order:** the facts are read and checked (refusals cost nothing; an identity's sequence is
//! not read, so a session waiting for a conversion of the same table holds no lock on it that
//! the conversion's `DROP IDENTITY` would wait for), then the table is locked `ACCESS EXCLUSIVE`
//! by OID (held to the end of the transaction; it rewrites nothing). `SET lock_timeout` first on a
//! busy table: this wait is PostgreSQL's usual one, in the lock's queue. Then, holding it, the
//! conversion waits for no other session's lock for long ([`lock_without_queueing`]): its
//! partitions and children, an identity's sequence and a sequence it drops are locked for at most
//! the smaller of `lock_timeout` and 1 s, or it fails with 55P03. (Any role can hold ROW EXCLUSIVE
//! on any relation: `nextval()` of its OID locks it before checking anything, and keeps the lock
//! to the end of the transaction even when it fails in a savepoint that is rolled back. Waiting
//! for that with the table locked would stall every reader and writer of the table for as long as
//! that role liked.) Then the facts are read again under the locks, a snowflake id is minted (so a
//! server that cannot mint refuses before any DDL), the largest stored id is read with a snapshot
//! taken after the locks, and the plan runs and is checked. Inserts from other sessions wait for
//! the lock, then use the new default. Under REPEATABLE READ or SERIALIZABLE the reads of the
//! facts after the lock would still see the transaction's snapshot from before it, so only a dry
//! run runs there.

use std::time::{Duration, Instant};

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::convert::{self, Column, Descendant, Grant, Outcome, Owned, Sequence, Source};
use crate::runtime::{clock, errors, snowflake};

/// Switches `tbl`.`col` to `DEFAULT snowflake_next()` (`snowflake_convert`), keeping the ids it
/// holds: the checks, the locks, an id minted to compare with, the stored ids' maximum, the plan
/// and the check of its effects. Returns the DDL it ran (or, with `dry_run`, would run); nothing
/// for a column that is converted already.
///
/// # Errors
/// The refusals of [`convert::check_convert`], [`convert::convert`] and
/// [`convert::check_converted`], a lock another session holds for too long (55P03), and what the
/// catalog reads, the locks and the statements raise.
pub fn convert_column(
    tbl: pg_sys::Oid,
    col: &str,
    drop_sequence: bool,
    dry_run: bool,
) -> Result<Vec<String>, ErrorReport> {
    let f = locked_column(tbl, col, dry_run, convert::check_convert)?;
    let c = &f.column;
    if c.source == Source::Converted {
        return Ok(Vec::new());
    }
    // An id minted now: the server can mint (or this refuses before any DDL), and every stored id
    // must lie below it. (Minted directly rather than through SPI, so that its refusal reaches the
    // caller as is.)
    let first_id = snowflake::next_owned_id();
    let generator = format!("{}.snowflake_next()", f.schema);
    let max_id = stored_max(tbl, col, dry_run)?;
    let plan =
        convert::convert(c, &generator, drop_sequence, max_id, first_id).map_err(|e| errors::convert_refused(&e, c))?;
    if dry_run {
        return Ok(plan);
    }
    // A serial's sequence the plan drops: its DROP SEQUENCE would wait for every lock on it.
    if let (true, Source::Sequence { sequence, .. }, Some(seq)) = (drop_sequence, &c.source, f.sequence) {
        lock_without_queueing(&[(seq, sequence.clone())], pg_sys::AccessExclusiveLock, &c.table)?;
    }
    run(&plan)?;
    let after = outcome(tbl, col, &f)?;
    convert::check_converted(c, drop_sequence, max_id, &after).map_err(|e| errors::convert_refused(&e, c))?;
    Ok(plan)
}

/// Gives a converted column back an identity that starts above every id it holds and every id
/// this server's generators may have handed out (`snowflake_unconvert`). Returns the DDL it ran
/// (or, with `dry_run`, would run).
///
/// # Errors
/// The refusals of [`convert::check_unconvert`], [`convert::unconvert`] and
/// [`convert::check_unconverted`], and what the catalog reads, the lock and the statements raise.
pub fn unconvert_column(tbl: pg_sys::Oid, col: &str, dry_run: bool) -> Result<Vec<String>, ErrorReport> {
    let f = locked_column(tbl, col, dry_run, convert::check_unconvert)?;
    let c = &f.column;
    // Above the largest stored id, and above every id the reservation covers (ids handed out by
    // SELECT snowflake_next() that were never stored). Under the lock no insert slips below it.
    let reserved = snowflake::max_id_before_reservation()?;
    let start = stored_max(tbl, col, dry_run)?.unwrap_or(0).max(reserved).saturating_add(1);
    let plan = convert::unconvert(c, start).map_err(|e| errors::convert_refused(&e, c))?;
    if !dry_run {
        run(&plan)?;
        let after = outcome(tbl, col, &f)?;
        convert::check_unconverted(&after).map_err(|e| errors::convert_refused(&e, c))?;
    }
    Ok(plan)
}

/// What a read of the facts is for, which decides how an identity's sequence is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    /// The checks before a real conversion locks the table, and the read of a plan's effects: the
    /// sequence's last value is not read, so this session takes no lock on the sequence that a
    /// concurrent conversion of the same table (which drops it while holding the table's lock)
    /// would wait for.
    Check,
    /// A dry run: the last value is read (`pg_sequence_last_value()`, ROW EXCLUSIVE on it, as any
    /// `nextval()`).
    Plan,
    /// Under the table's lock: the sequence is locked first ([`lock_without_queueing`]), then its
    /// last value is read.
    Locked,
}

/// The facts about a column, with the OIDs that the locks, the read of the stored ids and the
/// check of the plan's effects work from (the names in [`Column`] are for the plan's DDL and the
/// messages).
struct Facts {
    column: Column,
    /// The extension's schema, quoted.
    schema: String,
    /// The sequence of the column's identity, or of its `nextval()` default.
    sequence: Option<pg_sys::Oid>,
    /// The sequences `OWNED BY` the column.
    owned: Vec<pg_sys::Oid>,
}

/// The facts about `tbl`.`col` from the catalogs, by OID.
fn column(tbl: pg_sys::Oid, col: &str, read: Read) -> Result<Facts, ErrorReport> {
    Spi::connect(|client| {
        let t = client.select(
            "SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), quote_ident(a.attname),
                    quote_ident(pg_get_userbyid(c.relowner)), c.relkind IN ('r', 'p'), pg_has_role(c.relowner, 'USAGE'),
                    format_type(a.atttypid, a.atttypmod), a.attgenerated <> '', a.attnotnull, a.attidentity::text,
                    pg_get_expr(ad.adbin, ad.adrelid),
                    -- an identity's sequence
                    (SELECT d.objid FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
                     WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
                       AND d.refobjid = c.oid AND d.refobjsubid = a.attnum AND d.deptype = 'i'),
                    -- the sequence of a default that is exactly nextval() of it
                    (SELECT s.oid FROM pg_depend d JOIN pg_class s ON s.oid = d.refobjid AND s.relkind = 'S'
                     WHERE d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
                       AND d.refclassid = 'pg_class'::regclass
                       AND d.deptype = 'n'
                       AND pg_get_expr(ad.adbin, ad.adrelid) = format('nextval(%L::regclass)', s.oid::regclass)),
                    -- whether the default calls a function of this extension
                    EXISTS (SELECT 1 FROM pg_depend d
                            JOIN pg_depend x ON x.classid = 'pg_proc'::regclass AND x.objid = d.refobjid
                              AND x.deptype = 'e'
                            JOIN pg_extension e ON e.oid = x.refobjid AND e.extname = 'snowflake_id'
                            WHERE d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
                              AND d.refclassid = 'pg_proc'::regclass),
                    (SELECT quote_ident(en.nspname) FROM pg_extension e JOIN pg_namespace en ON en.oid = e.extnamespace
                     WHERE e.extname = 'snowflake_id'),
                    -- how pg_get_expr names the extension's functions: qualified, but for pg_catalog
                    (SELECT CASE WHEN en.nspname = 'pg_catalog' THEN '' ELSE quote_ident(en.nspname) || '.' END
                     FROM pg_extension e JOIN pg_namespace en ON en.oid = e.extnamespace
                       WHERE e.extname = 'snowflake_id'),
                    c.relkind = 'p' OR c.relispartition
                      OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid OR i.inhparent = c.oid),
                    a.attnum, has_schema_privilege(c.relnamespace, 'CREATE')
             FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2::name AND a.attnum > 0 AND NOT a.attisdropped
             LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
             WHERE c.oid = $1",
            Some(1),
            &[tbl.into(), col.into()],
        )?;
        if t.is_empty() {
            let table_exists = client
                .select("SELECT EXISTS (SELECT 1 FROM pg_class WHERE oid = $1)", Some(1), &[tbl.into()])?
                .first()
                .get_one::<bool>()?;
            let missing =
                if table_exists == Some(true) { errors::no_such_column(col) } else { errors::no_such_table() };
            return Ok(Err(missing));
        }
        let r = t.first();
        let text = |i| r.get::<String>(i).map(Option::unwrap_or_default);
        let flag = |i| r.get::<bool>(i).map(|b| b == Some(true));
        let table = text(1)?;
        let identity = text(9)?;
        let default = r.get::<String>(10)?;
        let prefix = text(15)?;
        let attnum = r.get::<i16>(17)?.unwrap_or(0);
        let owned = owned_sequences(client, tbl, attnum)?;
        let mut sequence_oid = None;
        let source = if identity == "a" || identity == "d" {
            match r.get::<pg_sys::Oid>(11)? {
                Some(seq) => {
                    sequence_oid = Some(seq);
                    let sequence = match sequence(client, seq, read, &table)? {
                        Ok(s) => s,
                        Err(e) => return Ok(Err(e)),
                    };
                    Source::Identity {
                        always: identity == "a",
                        sequence,
                        used_elsewhere: used_elsewhere(client, seq, tbl, col)?,
                    }
                }
                // A partition's identity, whose sequence belongs to the partitioned table.
                None => Source::Other("the identity of the table it is a partition of".into()),
            }
        } else if flag(13)? && default.as_deref().is_some_and(|d| convert::is_generator_call(d, &prefix)) {
            Source::Converted
        } else if let Some(seq) = r.get::<pg_sys::Oid>(12)? {
            sequence_oid = Some(seq);
            Source::Sequence {
                sequence: qualified(client, seq)?,
                owned: owned.contains(&seq),
                used_elsewhere: used_elsewhere(client, seq, tbl, col)?,
            }
        } else {
            default.clone().map_or(Source::Nothing, Source::Other)
        };
        let column = Column {
            table,
            column: text(2)?,
            owner: text(3)?,
            is_table: flag(4)?,
            may_alter: flag(5)?,
            type_name: text(6)?,
            generated: flag(7)?,
            not_null: flag(8)?,
            in_hierarchy: flag(16)?,
            may_create: flag(18)?,
            descendants: descendants(client, tbl, col, default, !identity.is_empty(), &prefix)?,
            source,
        };
        Ok(Ok(Facts { column, schema: text(14)?, sequence: sequence_oid, owned }))
    })
    .map_err(errors::catalog_query)?
}

type Client<'a> = pgrx::spi::SpiClient<'a>;

/// The table `$1` and its partitions and inheritance children at every level, as `family(rel)`:
/// the tables `SET DEFAULT` and `DROP IDENTITY` recurse to.
const FAMILY: &str = "WITH RECURSIVE family(rel) AS (
    SELECT $1::oid UNION SELECT i.inhrelid FROM pg_inherits i JOIN family f ON i.inhparent = f.rel)";

fn qualified(client: &Client<'_>, rel: pg_sys::Oid) -> Result<String, pgrx::spi::SpiError> {
    client
        .select(
            "SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) FROM pg_class c JOIN pg_namespace n ON \
                n.oid = c.relnamespace WHERE c.oid = $1",
            Some(1),
            &[rel.into()],
        )?
        .first()
        .get_one::<String>()
        .map(Option::unwrap_or_default)
}

/// An identity's sequence: its step, cache, start, last value (unless `read` is [`Read::Check`],
/// and when the caller may read it) and grants. Under [`Read::Locked`] it is first locked
/// `ACCESS EXCLUSIVE` until the end of the transaction ([`lock_without_queueing`], or a 55P03
/// error, returned as the inner error): no value is handed out between reading the last one and
/// dropping it, and the plan's `DROP IDENTITY`, which drops it, waits for no one. The last value
/// is the one on disk (`pg_sequence_last_value()`), which covers what other sessions hold in their
/// caches.
fn sequence(
    client: &Client<'_>,
    seq: pg_sys::Oid,
    read: Read,
    table: &str,
) -> Result<Result<Sequence, ErrorReport>, pgrx::spi::SpiError> {
    let name = qualified(client, seq)?;
    if read == Read::Locked {
        if let Err(e) = lock_without_queueing(&[(seq, name.clone())], pg_sys::AccessExclusiveLock, table) {
            return Ok(Err(e));
        }
    }
    let t = client.select(
        "SELECT s.seqincrement, s.seqcache, s.seqstart, has_sequence_privilege(s.seqrelid, 'SELECT')
         FROM pg_sequence s WHERE s.seqrelid = $1",
        Some(1),
        &[seq.into()],
    )?;
    let r = t.first();
    let (increment, cache, start, readable) = (
        r.get::<i64>(1)?.unwrap_or(1),
        r.get::<i64>(2)?.unwrap_or(1),
        r.get::<i64>(3)?.unwrap_or(1),
        r.get::<bool>(4)?,
    );
    let last_value = if read != Read::Check && readable == Some(true) {
        client.select("SELECT pg_sequence_last_value($1)", Some(1), &[seq.into()])?.first().get_one::<i64>()?
    } else {
        None
    };
    let grants = grants(client, seq)?;
    Ok(Ok(Sequence { name, last_value, start, increment, cache, grants }))
}

/// A sequence's privileges granted to roles other than its owner, in a fixed order.
fn grants(client: &Client<'_>, seq: pg_sys::Oid) -> Result<Vec<Grant>, pgrx::spi::SpiError> {
    client
        .select(
            "SELECT g.privilege_type, CASE WHEN g.grantee = 0 THEN 'PUBLIC'
               ELSE quote_ident(pg_get_userbyid(g.grantee)) END,
                    g.is_grantable
             FROM pg_class c, aclexplode(c.relacl) g
             WHERE c.oid = $1 AND g.grantee <> c.relowner ORDER BY 2, 1",
            None,
            &[seq.into()],
        )?
        .map(|r| {
            Ok(Grant {
                privilege: r.get::<String>(1)?.unwrap_or_default(),
                grantee: r.get::<String>(2)?.unwrap_or_default(),
                grant_option: r.get::<bool>(3)? == Some(true),
            })
        })
        .collect()
}

/// The table's partitions and inheritance children at every level, with what a conversion needs
/// to know of each. `default` is the table's own default for the column (as `pg_get_expr` prints
/// it) and `identity` whether the column is an identity: a descendant's default that is neither
/// the same nor this extension's generator, or an identity the table does not have, is reported.
fn descendants(
    client: &Client<'_>,
    tbl: pg_sys::Oid,
    col: &str,
    default: Option<String>,
    identity: bool,
    prefix: &str,
) -> Result<Vec<Descendant>, pgrx::spi::SpiError> {
    client
        .select(
            &format!(
                "{FAMILY}
                 SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relkind = 'f',
                   pg_has_role(c.relowner, 'USAGE'),
                        CASE WHEN a.attidentity <> '' AND NOT $4 THEN 'GENERATED AS IDENTITY'
                             WHEN pg_get_expr(ad.adbin, ad.adrelid) IS DISTINCT FROM $3 THEN pg_get_expr(ad.adbin,
                               ad.adrelid) END
                 FROM family f
                 JOIN pg_class c ON c.oid = f.rel AND c.oid <> $1
                 JOIN pg_namespace n ON n.oid = c.relnamespace
                 LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2::name AND NOT a.attisdropped
                 LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
                 ORDER BY 1"
            ),
            None,
            &[tbl.into(), col.into(), default.into(), identity.into()],
        )?
        .map(|r| {
            Ok(Descendant {
                table: r.get::<String>(1)?.unwrap_or_default(),
                foreign: r.get::<bool>(2)? == Some(true),
                may_alter: r.get::<bool>(3)? == Some(true),
                other_default: r.get::<String>(4)?.filter(|d| !convert::is_generator_call(d, prefix)),
            })
        })
        .collect()
}

/// The sequences `OWNED BY` the column (a serial's is), by OID.
fn owned_sequences(
    client: &Client<'_>,
    tbl: pg_sys::Oid,
    attnum: i16,
) -> Result<Vec<pg_sys::Oid>, pgrx::spi::SpiError> {
    client
        .select(
            "SELECT d.objid FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
             WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
               AND d.refobjid = $1 AND d.refobjsubid = $2 AND d.deptype = 'a'
             ORDER BY 1",
            None,
            &[tbl.into(), i32::from(attnum).into()],
        )?
        .map(|r| r.get::<pg_sys::Oid>(1).map(Option::unwrap_or_default))
        .collect()
}

/// Whether anything but this column's default, in the table and the tables that inherit it or
/// are its partitions (`SET DEFAULT` changes theirs too), depends on the sequence: another
/// table's default, a view, a function's SQL body.
fn used_elsewhere(
    client: &Client<'_>,
    seq: pg_sys::Oid,
    tbl: pg_sys::Oid,
    col: &str,
) -> Result<bool, pgrx::spi::SpiError> {
    client
        .select(
            &format!(
                "{FAMILY}
                 SELECT EXISTS (
                   SELECT 1 FROM pg_depend d
                   WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = $2 AND d.deptype = 'n'
                     AND NOT (d.classid = 'pg_attrdef'::regclass AND d.objid IN (
                       SELECT ad.oid FROM family f
                       JOIN pg_attribute a ON a.attrelid = f.rel AND a.attname = $3::name
                       JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum)))"
            ),
            Some(1),
            &[tbl.into(), seq.into(), col.into()],
        )?
        .first()
        .get_one::<bool>()
        .map(|b| b != Some(false))
}

/// Reads the facts, checks them with `check`, and unless `dry_run` locks the table, then its
/// partitions and children, and reads the facts again under the locks (another session may have
/// changed the table while this one waited).
fn locked_column(
    tbl: pg_sys::Oid,
    col: &str,
    dry_run: bool,
    check: fn(&Column) -> Result<(), convert::ConvertError>,
) -> Result<Facts, ErrorReport> {
    let f = column(tbl, col, if dry_run { Read::Plan } else { Read::Check })?;
    check(&f.column).map_err(|e| errors::convert_refused(&e, &f.column))?;
    if dry_run {
        return Ok(f);
    }
    // SAFETY: a read of the transaction's isolation level, a lock on the table's OID (so that a
    // rename while this waits cannot swap the table), and the transaction id the DDL needs anyway:
    // with one, pgrx runs every SPI query from here on read-write, each with a new snapshot, so
    // the reads below see everything committed before the lock was granted. (At wal_level
    // replica or logical, taking ACCESS EXCLUSIVE assigns the id already, to log the lock for
    // standbys; at minimal only this call does.)
    unsafe {
        if pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32 {
            return Err(errors::convert_needs_read_committed(&f.column.table));
        }
        pg_sys::LockRelationOid(tbl, pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE);
        let _ = pg_sys::GetCurrentTransactionId();
    }
    lock_descendants(tbl, &f.column.table)?;
    let f = column(tbl, col, Read::Locked)?;
    check(&f.column).map_err(|e| errors::convert_refused(&e, &f.column))?;
    Ok(f)
}

/// Locks the table's partitions and inheritance children at every level `ACCESS EXCLUSIVE`, by
/// OID, as `LOCK TABLE` on the table would (the plan's `SET DEFAULT` and `DROP IDENTITY` recurse
/// to them), but waiting for none for long ([`lock_without_queueing`]). The tree is listed again
/// until no table in it is left unlocked: a table joins the tree only with a lock on its parent,
/// so once every listed table is locked, the list is the whole tree. (`table` names the table in a
/// message.)
fn lock_descendants(tbl: pg_sys::Oid, table: &str) -> Result<(), ErrorReport> {
    let mut locked = vec![tbl];
    loop {
        let family: Vec<(pg_sys::Oid, String)> = Spi::connect(|client| {
            client
                .select(
                    &format!(
                        "{FAMILY}
                         SELECT f.rel, quote_ident(n.nspname) || '.' || quote_ident(c.relname)
                         FROM family f JOIN pg_class c ON c.oid = f.rel JOIN pg_namespace n ON n.oid = c.relnamespace"
                    ),
                    None,
                    &[tbl.into()],
                )?
                .map(|r| Ok((r.get::<pg_sys::Oid>(1)?.unwrap_or_default(), r.get::<String>(2)?.unwrap_or_default())))
                .collect::<Result<_, pgrx::spi::SpiError>>()
        })
        .map_err(errors::catalog_query)?;
        let more: Vec<_> = family.into_iter().filter(|(rel, _)| !locked.contains(rel)).collect();
        if more.is_empty() {
            return Ok(());
        }
        lock_without_queueing(&more, pg_sys::AccessExclusiveLock, table)?;
        locked.extend(more.iter().map(|&(rel, _)| rel));
    }
}

/// Locks each of `rels` (an OID, and its name for the error) in `mode` until the end of the
/// transaction, while this session holds `table`'s `ACCESS EXCLUSIVE` lock, without joining any
/// lock's queue: it tries, waits 5 ms on the latch (a cancel or a termination ends the wait), and
/// tries again, for at most the smaller of `lock_timeout` (when set) and 1 s; then it fails with
/// 55P03, and the transaction's abort releases the table. So another session's lock holds up the
/// table's readers and writers, who queue behind the table's lock, for at most that long. Waiting
/// in the queue instead would let any role stall them for as long as it liked: `nextval()` of a
/// relation's OID takes ROW EXCLUSIVE on it before checking anything, and keeps it to the end of
/// the transaction even when it fails in a savepoint that is rolled back. (No deadlock can form
/// here either: this never waits in the lock manager.)
fn lock_without_queueing(rels: &[(pg_sys::Oid, String)], mode: u32, table: &str) -> Result<(), ErrorReport> {
    // SAFETY: a read of this backend's own setting.
    let lock_timeout_ms = unsafe { pg_sys::LockTimeout };
    let bound_ms = if lock_timeout_ms > 0 { lock_timeout_ms.min(1000) } else { 1000 };
    let bound = Duration::from_millis(bound_ms.unsigned_abs().into());
    let started = Instant::now();
    let mut left: Vec<&(pg_sys::Oid, String)> = rels.iter().collect();
    loop {
        // SAFETY: conditional locks on relation OIDs, held to the end of the transaction.
        left.retain(|&&(rel, _)| unsafe { !pg_sys::ConditionalLockRelationOid(rel, mode as pg_sys::LOCKMODE) });
        match left.first() {
            None => return Ok(()),
            Some((_, name)) if started.elapsed() >= bound => {
                return Err(errors::convert_lock_not_available(name, table, bound.as_millis()))
            }
            Some(_) => clock::wait_on_latch_ms(5),
        }
    }
}

/// The largest id the column holds in the table and in each of its partitions and children that
/// has storage (each by its own number of the column, which a dropped column or an attached table
/// can make differ), or `None` when it holds none.
///
/// Read by OID with PostgreSQL's own scans, not a query: nothing is planned, no name is resolved,
/// and no code of any role runs. (A query's plan would evaluate the owner's index expressions, and
/// its execution may call the owner's functions; a name looked up again after the table's lock
/// could meet another table, put under it by a schema's rename.) A row policy applies only to
/// queries: this sees every row, which is what a check of every stored id needs, and what the
/// owner, who can switch the policy off, may see.
///
/// The snapshot is a new one, taken now (`GetLatestSnapshot`): under the table's lock it sees
/// every row committed before the lock was granted, which the statement's own snapshot, taken
/// before this waited for the lock, would miss, and no other session can write the table until
/// this transaction ends. (It sees this transaction's own earlier rows too.) A dry run holds no
/// lock but `ACCESS SHARE`, taken here as a query's would be, and reads what is committed now.
fn stored_max(tbl: pg_sys::Oid, col: &str, dry_run: bool) -> Result<Option<i64>, ErrorReport> {
    let tables: Vec<(pg_sys::Oid, i16)> = Spi::connect(|client| {
        client
            .select(
                &format!(
                    "{FAMILY}
                     SELECT c.oid, a.attnum FROM family f
                     JOIN pg_class c ON c.oid = f.rel AND c.relkind = 'r'
                     JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2::name AND a.attnum > 0
                       AND NOT a.attisdropped"
                ),
                None,
                &[tbl.into(), col.into()],
            )?
            .map(|r| Ok((r.get::<pg_sys::Oid>(1)?.unwrap_or_default(), r.get::<i16>(2)?.unwrap_or_default())))
            .collect::<Result<_, pgrx::spi::SpiError>>()
    })
    .map_err(errors::catalog_query)?;
    let lock = if dry_run { pg_sys::AccessShareLock } else { pg_sys::NoLock } as pg_sys::LOCKMODE;
    // SAFETY: PostgreSQL's snapshot API: a snapshot registered for the scans and unregistered
    // after them (on an error, the abort releases it with the scans and relations).
    unsafe {
        let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
        let max = tables.iter().map(|&(rel, attnum)| largest_in(rel, attnum, lock, snapshot)).max().flatten();
        pg_sys::UnregisterSnapshot(snapshot);
        Ok(max)
    }
}

/// The largest non-NULL value of column `attnum` in the table `rel` that `snapshot` sees: from an
/// index that can give it ([`ordered_index`]), at one end of it, else from a scan of the whole
/// table. `None` for a table dropped since it was listed (a dry run's), or one with no value.
///
/// # Safety
/// In a transaction, with `snapshot` registered; `lock` is the lock to take on `rel` (`NoLock`
/// when this transaction holds one already).
unsafe fn largest_in(rel: pg_sys::Oid, attnum: i16, lock: pg_sys::LOCKMODE, snapshot: pg_sys::Snapshot) -> Option<i64> {
    // SAFETY: PostgreSQL's relation, slot, index-scan and table-scan API, used as its own callers
    // use it; every relation stays locked to the end of the transaction (closed with NoLock).
    unsafe {
        let heap = pg_sys::try_relation_open(rel, lock);
        if heap.is_null() {
            return None;
        }
        let slot = pg_sys::table_slot_create(heap, std::ptr::null_mut());
        let value = |slot| {
            let mut isnull = false;
            let datum = pg_sys::slot_getattr(slot, attnum.into(), &mut isnull);
            i64::from_datum(datum, isnull)
        };
        let mut max = None;
        if let Some((index, direction)) = ordered_index(heap, attnum) {
            // The column is the index's first key: skip its NULLs (a key IS NOT NULL, as the
            // planner's min/max does), and take the first row the snapshot sees from the end.
            let mut key = pg_sys::ScanKeyData::default();
            pg_sys::ScanKeyEntryInitialize(
                &mut key,
                (pg_sys::SK_ISNULL | pg_sys::SK_SEARCHNOTNULL) as i32,
                1,
                0,
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::Datum::from(0),
            );
            #[cfg(not(feature = "pg18"))]
            let scan = pg_sys::index_beginscan(heap, index, snapshot, 1, 0);
            #[cfg(feature = "pg18")]
            let scan = pg_sys::index_beginscan(heap, index, snapshot, std::ptr::null_mut(), 1, 0);
            pg_sys::index_rescan(scan, &mut key, 1, std::ptr::null_mut(), 0);
            while pg_sys::index_getnext_slot(scan, direction, slot) {
                max = value(slot);
                if max.is_some() {
                    break;
                }
                pgrx::check_for_interrupts!();
            }
            pg_sys::index_endscan(scan);
            pg_sys::index_close(index, pg_sys::NoLock as pg_sys::LOCKMODE);
        } else {
            let scan = pg_sys::table_beginscan(heap, snapshot, 0, std::ptr::null_mut());
            while pg_sys::table_scan_getnextslot(scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
                max = max.max(value(slot));
                pgrx::check_for_interrupts!();
            }
            pg_sys::table_endscan(scan);
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::relation_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE);
        max
    }
}

/// An index of `heap` whose first end holds the largest value of column `attnum`, opened, and the
/// direction to read it in: a valid btree index, not partial, whose first key is the plain column
/// with `bigint`'s own ordering (the default operator class), that every snapshot may use
/// (not `indcheckxmin`). Backwards for an ascending one, forwards for a descending one.
///
/// # Safety
/// `heap` is open and locked.
unsafe fn ordered_index(
    heap: pg_sys::Relation,
    attnum: i16,
) -> Option<(pg_sys::Relation, pg_sys::ScanDirection::Type)> {
    // SAFETY: the relation cache's entries of `heap`'s indexes, read as the planner reads them
    // (opened with ACCESS SHARE, which any index scan takes); the predicate is tested for
    // presence only, never evaluated.
    unsafe {
        let family = pg_sys::get_opclass_family(pg_sys::GetDefaultOpClass(pg_sys::INT8OID, pg_sys::BTREE_AM_OID));
        let list = pg_sys::RelationGetIndexList(heap);
        let count = if list.is_null() { 0 } else { (*list).length };
        for i in 0..count {
            let index = pg_sys::index_open(pg_sys::list_nth_oid(list, i), pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            let form = &*(*index).rd_index;
            let usable = form.indisvalid
                && form.indisready
                && !form.indcheckxmin
                && (*(*index).rd_rel).relam == pg_sys::BTREE_AM_OID
                && form.indnkeyatts >= 1
                && *form.indkey.values.as_ptr() == attnum
                && *(*index).rd_opcintype == pg_sys::INT8OID
                && *(*index).rd_opfamily == family
                && pg_sys::heap_attisnull(
                    (*index).rd_indextuple,
                    pg_sys::Anum_pg_index_indpred as i32,
                    std::ptr::null_mut(),
                );
            if usable {
                let descending = i32::from(*(*index).rd_indoption) & pg_sys::INDOPTION_DESC as i32 != 0;
                let direction = if descending {
                    pg_sys::ScanDirection::ForwardScanDirection
                } else {
                    pg_sys::ScanDirection::BackwardScanDirection
                };
                return Some((index, direction));
            }
            pg_sys::index_close(index, pg_sys::NoLock as pg_sys::LOCKMODE);
        }
        None
    }
}

/// Runs the plan's statements.
fn run(plan: &[String]) -> Result<(), ErrorReport> {
    for stmt in plan {
        Spi::run(stmt).map_err(errors::catalog_query)?;
    }
    Ok(())
}

/// What the plan did to the column, read by OID (`before` is what was read under the lock): how
/// the column gets its values now, whether the sequence it used is still there, and the grants of
/// each sequence that is newly `OWNED BY` it.
fn outcome(tbl: pg_sys::Oid, col: &str, before: &Facts) -> Result<Outcome, ErrorReport> {
    let after = column(tbl, col, Read::Check)?;
    Spi::connect(|client| {
        let sequence_left = match before.sequence {
            Some(seq) => client
                .select("SELECT EXISTS (SELECT 1 FROM pg_class WHERE oid = $1)", Some(1), &[seq.into()])?
                .first()
                .get_one::<bool>()?
                .unwrap_or(false),
            None => false,
        };
        let new_owned = after
            .owned
            .iter()
            .filter(|seq| !before.owned.contains(seq))
            .map(|&seq| {
                let t = client.select(
                    "SELECT s.seqstart, s.seqincrement, pg_sequence_last_value(s.seqrelid)
                     FROM pg_sequence s WHERE s.seqrelid = $1",
                    Some(1),
                    &[seq.into()],
                )?;
                let r = t.first();
                Ok(Owned {
                    grants: grants(client, seq)?,
                    start: r.get::<i64>(1)?.unwrap_or(i64::MIN),
                    increment: r.get::<i64>(2)?.unwrap_or(0),
                    last_value: r.get::<i64>(3)?,
                })
            })
            .collect::<Result<_, pgrx::spi::SpiError>>()?;
        Ok(Outcome { source: after.column.source, sequence_left, new_owned })
    })
    .map_err(errors::catalog_query)
}
