//! The first mint in a database: its recorded id space, and the floor its stored ids set.
//!
//! Before a backend issues its first id, it reads the database's record of the id space (the
//! `snowflake_id_space` table, see `crate::core::space`), and again whenever any database's
//! record changed since (the table's trigger bumps a counter in shared memory). Once per
//! database and server start, and again when its record changes, the first mint also reads the
//! largest id stored in every column a generator fills, and raises the generators above it, so
//! that a restored, upgraded or cloned database never gets an id at or below one it holds,
//! whatever the server's clock and reservation file say.
//!
//! # No code of any role runs in it
//! The catalog queries run through SPI as the session's own role, on catalogs only, with
//! `search_path = pg_catalog, pg_temp`, so no function or operator a role created can be picked.
//! The record itself (the extension's own table, which only a superuser can alter) is read by a
//! heap scan under a fresh catalog snapshot, so that a statement that began before a change
//! committed still sees it.
//! The stored ids are not read with SQL at all: planning a query on a table evaluates its index
//! and statistics expressions, which the table's owner writes. Instead each column's B-tree
//! index (its first column, the type's default operator class, no predicate) is opened by OID
//! and its largest entry read from the index pages (`index_getnext_tid` from the end that holds
//! it, index tuples only, under `SnapshotAny`: an entry whose row is deleted or not yet
//! committed counts too).
//! Only permanent plain tables are read (never a foreign table or another session's temporary
//! one; a partitioned table through its leaves). Each table and index is locked `ACCESS SHARE`
//! only if that is free at once, and unlocked as soon as it is read: a table someone holds an
//! exclusive lock on is skipped (a LOG line says so), and the database is marked done all the
//! same, so that a lock no one releases cannot make every new session scan again. A column
//! without such an index is not read (a LOG line says so).
//!
//! A database whose record names another layout or epoch refuses snowflake ids (55000) until
//! the settings or the record are fixed; UUIDv7, which no setting shapes, still mints. The
//! registry of scanned databases and the record counter are in `crate::shmem`.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, Spi};

use crate::core::space::{self, Recorded, UUIDV7_MAX_STEPS};
use crate::core::uuidv7;
use crate::{clock, errors, guc, restricted, shmem};

/// This backend's verdict (a backend serves one database for its whole life).
static VERDICT: AtomicU8 = AtomicU8::new(UNCHECKED);
const UNCHECKED: u8 = 0;
/// Checked: both generators may mint.
const READY: u8 = 1;
/// Checked, and the record names another id space: only UUIDv7 may mint.
const SNOWFLAKE_REFUSED: u8 = 2;
/// The record counter (`shmem::space_generation`) when this backend last checked.
static CHECKED_AT: AtomicU64 = AtomicU64::new(u64::MAX);

/// Whether this backend may mint snowflake ids without checking again (the fast path's test).
#[inline]
pub fn snowflake_ready() -> bool {
    VERDICT.load(Ordering::Relaxed) == READY && CHECKED_AT.load(Ordering::Relaxed) == shmem::space_generation()
}

/// Checks the database before the first id this backend mints, after any record changed, and
/// on every snowflake call while the record names another id space.
///
/// # Errors
/// 55000 for snowflake ids when the record names another layout or epoch; any error of the
/// catalog queries: nothing is minted then.
pub fn ensure_checked(snowflake: bool) -> Result<(), ErrorReport> {
    let generation = shmem::space_generation();
    if CHECKED_AT.load(Ordering::Relaxed) == generation {
        match VERDICT.load(Ordering::Relaxed) {
            READY => return Ok(()),
            SNOWFLAKE_REFUSED if !snowflake => return Ok(()),
            _ => {}
        }
    }
    let mismatch = restricted::with_catalog_search_path(check)?;
    VERDICT.store(if mismatch.is_some() { SNOWFLAKE_REFUSED } else { READY }, Ordering::Relaxed);
    // The counter read before the check: a change committed meanwhile is seen at the next call.
    CHECKED_AT.store(generation, Ordering::Relaxed);
    match mismatch {
        Some(m) if snowflake => Err(errors::space_mismatch(&m)),
        _ => Ok(()),
    }
}

/// The record, and on the first check of this database since the start (or since its record
/// changed), the stored ids.
fn check() -> Result<Option<space::Mismatch>, ErrorReport> {
    let layout = guc::layout();
    let (recorded, fingerprint) = read_record()?;
    let mismatch = space::judge(&recorded, layout).err();
    // SAFETY: a plain read of this backend's database, set at connection.
    let database = u32::from(unsafe { pg_sys::MyDatabaseId });
    if !shmem::database_checked(database, fingerprint) {
        raise_above_stored(mismatch.is_none())?;
        shmem::mark_database_checked(database, fingerprint);
    }
    Ok(mismatch)
}

fn spi_error(e: pgrx::spi::SpiError) -> ErrorReport {
    ErrorReport::new(pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("snowflake_id catalog query: {e}"), "")
}

/// The first column of the first row, `None` for no row or NULL.
fn first<T: IntoDatum + FromDatum>(t: pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::SpiResult<Option<T>> {
    if t.is_empty() {
        Ok(None)
    } else {
        t.first().get_one::<T>()
    }
}

/// The rows of the extension's own `snowflake_id_space` table (found as a member of the
/// extension, never by name alone; none before an update to 0.2.0), and a fingerprint of them
/// that no session setting changes, so that a database whose record changed is scanned again.
///
/// Read with a heap scan under a fresh catalog snapshot, not the statement's: a statement (or a
/// repeatable-read transaction) that began before a change committed must still see it, since
/// the change's notice (`shmem::space_generation`) is consumed by this check.
fn read_record() -> Result<(Vec<Recorded>, u32), ErrorReport> {
    let table = Spi::connect(|client| {
        client
            .select(
                "SELECT c.oid
                 FROM pg_extension e
                 JOIN pg_depend d ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
                                 AND d.deptype = 'e' AND d.classid = 'pg_class'::regclass
                 JOIN pg_class c ON c.oid = d.objid AND c.relname = 'snowflake_id_space' AND c.relkind = 'r'
                 WHERE e.extname = 'snowflake_id'",
                None,
                &[],
            )
            .and_then(first::<pg_sys::Oid>)
    })
    .map_err(spi_error)?;
    let Some(table) = table else { return Ok((Vec::new(), 1)) };
    let mut recorded = Vec::new();
    // FNV-1a over the rows as read.
    let mut hash: u32 = 0x811c_9dc5;
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: PostgreSQL's table and system-scan API, used as its callers do; a NULL snapshot
    // makes systable_beginscan take a fresh catalog snapshot (always fresh for a table that is
    // not a catalog). Errors abort the transaction, which closes the scan and the table.
    unsafe {
        let rel = pg_sys::table_open(table, lock);
        let desc = pgrx::PgTupleDesc::from_pg_unchecked((*rel).rd_att);
        let types: Vec<pg_sys::Oid> = (0..desc.len()).filter_map(|i| desc.get(i)).map(|a| a.atttypid).collect();
        if types.get(..3) != Some(&[pg_sys::TEXTOID, pg_sys::TIMESTAMPTZOID, pg_sys::TIMESTAMPTZOID][..]) {
            pg_sys::table_close(rel, lock);
            return Err(errors::space_record_altered());
        }
        let scan =
            pg_sys::systable_beginscan(rel, pg_sys::InvalidOid, false, std::ptr::null_mut(), 0, std::ptr::null_mut());
        let mut values = vec![pg_sys::Datum::from(0); desc.len()];
        let mut nulls = vec![true; desc.len()];
        loop {
            let tuple = pg_sys::systable_getnext(scan);
            if tuple.is_null() {
                break;
            }
            pg_sys::heap_deform_tuple(tuple, (*rel).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
            let layout = String::from_datum(values[0], nulls[0]).unwrap_or_default();
            let unix_us = |i: usize| {
                (!nulls[i]).then(|| crate::core::time::unix_us_from_pg_us(values[i].value() as i64)).flatten()
            };
            let epoch = unix_us(1).map_or(i64::MIN, |us| us.div_euclid(1000));
            let at = unix_us(2).unwrap_or(i64::MIN);
            for b in layout.bytes().chain(epoch.to_le_bytes()).chain(at.to_le_bytes()) {
                hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
            }
            recorded.push(Recorded { layout, epoch_unix_ms: epoch });
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, lock);
    }
    // The same rows in another order are the same record.
    recorded.sort_by(|a, b| (&a.layout, a.epoch_unix_ms).cmp(&(&b.layout, b.epoch_unix_ms)));
    // Zero marks a free registry entry.
    Ok((recorded, hash | 1))
}

/// One column a generator fills, in a plain table, with the index to read it through.
struct Column {
    name: String,
    table: pg_sys::Oid,
    attnum: i16,
    index: Option<pg_sys::Oid>,
    snowflake: bool,
}

/// The columns whose default calls one of this extension's generators: a partitioned table
/// stands for its leaf partitions (which inserts through it fill with its default). Only plain,
/// permanent tables; the index is the first valid B-tree index without a predicate that starts
/// with the column under the type's default operator class.
fn generator_columns() -> Result<Vec<Column>, ErrorReport> {
    Spi::connect(|client| {
        client
            .select(
                "WITH gen AS (
                   SELECT DISTINCT ad.adrelid AS relid, a.attname, p.proname = 'snowflake_next' AS snowflake
                   FROM pg_extension e
                   JOIN pg_depend x ON x.refclassid = 'pg_extension'::regclass AND x.refobjid = e.oid
                                   AND x.deptype = 'e' AND x.classid = 'pg_proc'::regclass
                   JOIN pg_proc p ON p.oid = x.objid AND p.proname IN ('snowflake_next', 'uuidv7_next', 'uuidv7')
                   JOIN pg_depend d ON d.refclassid = 'pg_proc'::regclass AND d.refobjid = p.oid
                                   AND d.classid = 'pg_attrdef'::regclass
                   JOIN pg_attrdef ad ON ad.oid = d.objid
                   JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum AND NOT a.attisdropped
                   WHERE e.extname = 'snowflake_id'
                 ), leaves AS (
                   SELECT DISTINCT t.relid, g.attname, g.snowflake
                   FROM gen g JOIN pg_class c ON c.oid = g.relid
                   CROSS JOIN LATERAL (SELECT pt.relid FROM pg_partition_tree(c.oid) pt
                                       WHERE c.relkind = 'p' AND pt.isleaf
                                       UNION ALL SELECT c.oid WHERE c.relkind = 'r') t
                 )
                 SELECT format('%s.%I', c.oid::regclass, a.attname), c.oid, l.snowflake, a.attnum,
                        (SELECT i.indexrelid FROM pg_index i
                         JOIN pg_class ic ON ic.oid = i.indexrelid
                         JOIN pg_am am ON am.oid = ic.relam AND am.amname = 'btree'
                         JOIN pg_opclass oc ON oc.oid = i.indclass[0] AND oc.opcdefault AND oc.opcintype = a.atttypid
                         WHERE i.indrelid = c.oid AND i.indkey[0] = a.attnum
                           AND i.indpred IS NULL AND i.indisvalid AND i.indisready
                         ORDER BY i.indexrelid LIMIT 1)
                 FROM leaves l
                 JOIN pg_class c ON c.oid = l.relid AND c.relkind = 'r' AND c.relpersistence <> 't'
                 JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = l.attname AND NOT a.attisdropped
                 WHERE a.atttypid = CASE WHEN l.snowflake THEN 'int8' ELSE 'uuid' END::regtype
                 ORDER BY 1",
                None,
                &[],
            )?
            .map(|row| {
                Ok(Column {
                    name: row.get::<String>(1)?.unwrap_or_default(),
                    table: row.get::<pg_sys::Oid>(2)?.unwrap_or(pg_sys::InvalidOid),
                    snowflake: row.get::<bool>(3)?.unwrap_or(false),
                    attnum: row.get::<i16>(4)?.unwrap_or(0),
                    index: row.get::<pg_sys::Oid>(5)?,
                })
            })
            .collect::<Result<Vec<Column>, pgrx::spi::SpiError>>()
    })
    .map_err(spi_error)
}

/// Raises the generators above the largest id stored in every column a generator fills, up to
/// the horizon (`crate::core::space::horizon_ms`). Snowflake columns only when the record names
/// the server's id space (`decode`): otherwise their ids mean other times. A table another
/// session holds locked is skipped and logged, and the database counts as read all the same: a
/// lock any role can hold must not make every new session read the database again.
fn raise_above_stored(decode: bool) -> Result<(), ErrorReport> {
    let layout = guc::layout();
    // The generators' clock: the wait for stored ids ahead of it is judged on it.
    let now = clock::now_unix_ms();
    let horizon = space::horizon_ms(&guc::clock_policy());
    let snowflake_bound = space::snowflake_search_bound(layout, now, horizon);
    let uuid_bound = space::uuidv7_search_bound(now, space::horizon_ms(&guc::uuidv7_clock_policy()));
    let (mut snowflake_floor, mut uuidv7_floor) = (None::<u64>, None::<u64>);
    let (mut unindexed, mut beyond, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    for c in generator_columns()? {
        if c.snowflake && !decode {
            continue;
        }
        let Some(index) = c.index else {
            unindexed.push(c.name);
            continue;
        };
        if c.snowflake {
            let below = snowflake_bound.map(pg_sys::Datum::from);
            match last_key(&c, index, below.map(|b| (b, pg_sys::F_INT8LT)), |_| true, 1) {
                Read::Locked => {
                    skipped.push(c.name);
                    continue;
                }
                Read::Found(key) => {
                    // An int8 Datum holds the value itself.
                    let id = key.value() as i64;
                    if let Some(w) = space::snowflake_floor(layout, id) {
                        snowflake_floor = snowflake_floor.max(Some(w));
                    }
                }
                Read::Empty => {}
            }
            if snowflake_bound.is_some_and(|bound| beyond_bound(&c, index, bound)) {
                beyond.push(c.name);
            }
        } else {
            let bound = pgrx::Uuid::from_bytes(uuid_bound);
            let Some(bound_datum) = bound.into_datum() else { continue };
            let is_v7 = |d: pg_sys::Datum| uuid_bytes(d).is_some_and(|u| uuidv7::version(&u) == Some(7));
            match last_key(&c, index, Some((bound_datum, pg_sys::F_UUID_LT)), is_v7, UUIDV7_MAX_STEPS) {
                Read::Locked => skipped.push(c.name),
                Read::Found(key) => {
                    if let Some(w) = uuid_bytes(key).and_then(|u| space::uuidv7_floor(&u)) {
                        uuidv7_floor = uuidv7_floor.max(Some(w));
                    }
                }
                Read::Empty => {}
            }
        }
    }
    // For the server log only: a client inserting rows has nothing to do about them, and the
    // names are other roles' tables.
    if !unindexed.is_empty() {
        errors::stored_ids_unchecked(&unindexed).report(PgLogLevel::LOG_SERVER_ONLY);
    }
    if !beyond.is_empty() {
        errors::stored_ids_beyond_horizon(&beyond, horizon).report(PgLogLevel::LOG_SERVER_ONLY);
    }
    if !skipped.is_empty() {
        errors::stored_ids_locked(&skipped).report(PgLogLevel::LOG_SERVER_ONLY);
    }
    shmem::raise_to_words(layout, snowflake_floor, uuidv7_floor, now);
    Ok(())
}

/// Whether the index holds an entry at or past `bound` (the horizon's): its largest entry of all.
fn beyond_bound(column: &Column, index: pg_sys::Oid, bound: i64) -> bool {
    matches!(last_key(column, index, None, |_| true, 1), Read::Found(k) if k.value() as i64 >= bound)
}

/// The 16 bytes a uuid Datum points to.
fn uuid_bytes(d: pg_sys::Datum) -> Option<[u8; 16]> {
    let p = d.cast_mut_ptr::<[u8; 16]>();
    // SAFETY: a uuid Datum points to its 16 bytes (pg_uuid_t), which live in the scan's memory.
    (!p.is_null()).then(|| unsafe { *p })
}

/// What reading an index found.
enum Read {
    /// The largest accepted key (a by-value int8, or a pointer into the scan's tuple copy).
    Found(pg_sys::Datum),
    /// No accepted key below the bound (within the steps allowed).
    Empty,
    /// The table or the index was locked by another session; nothing was read.
    Locked,
}

/// Reads the largest key of an index's first column that is below `below` (with the `<`
/// function given), not NULL, and `accept`ed, stepping down at most `steps` entries, from the
/// end the index keeps it (the last entry, or the first of a `DESC` index). The index and its
/// table are locked only if that is free at once, and unlocked at the end. An index that is no
/// longer the column's live, valid index (dropped or rebuilt concurrently since the catalog
/// query) counts as locked: it is skipped, and logged.
fn last_key(
    column: &Column,
    index: pg_sys::Oid,
    below: Option<(pg_sys::Datum, u32)>,
    mut accept: impl FnMut(pg_sys::Datum) -> bool,
    steps: usize,
) -> Read {
    let table = column.table;
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: PostgreSQL's relation and index-scan API, used as its own callers do: lock, open,
    // scan, close, unlock. Any error (a concurrent drop seen by the open, say) aborts the
    // transaction, which releases the locks and the scan.
    unsafe {
        if !pg_sys::ConditionalLockRelationOid(table, lock) {
            return Read::Locked;
        }
        if !pg_sys::ConditionalLockRelationOid(index, lock) {
            pg_sys::UnlockRelationOid(table, lock);
            return Read::Locked;
        }
        let unlock = || {
            pg_sys::UnlockRelationOid(index, lock);
            pg_sys::UnlockRelationOid(table, lock);
        };
        // Dropped between the catalog query and the lock: nothing to read.
        let heap = pg_sys::try_relation_open(table, pg_sys::NoLock as pg_sys::LOCKMODE);
        if heap.is_null() {
            unlock();
            return Read::Empty;
        }
        let irel = pg_sys::try_relation_open(index, pg_sys::NoLock as pg_sys::LOCKMODE);
        if irel.is_null() {
            pg_sys::relation_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE);
            unlock();
            return Read::Locked;
        }
        let ix = (*irel).rd_index;
        let usable = (*(*irel).rd_rel).relkind as u8 == pg_sys::RELKIND_INDEX
            && (*(*irel).rd_rel).relam == pg_sys::BTREE_AM_OID
            && !ix.is_null()
            && (*ix).indrelid == table
            && (*ix).indisvalid
            && (*ix).indisready
            && (*ix).indislive
            && (*ix).indkey.dim1 >= 1
            && *(*ix).indkey.values.as_ptr() == column.attnum;
        let mut found = if usable { Read::Empty } else { Read::Locked };
        if usable {
            let descending = i32::from(*(*irel).rd_indoption) & pg_sys::INDOPTION_DESC as i32 != 0;
            let direction = if descending {
                pg_sys::ScanDirection::ForwardScanDirection
            } else {
                pg_sys::ScanDirection::BackwardScanDirection
            };
            let mut keys: [pg_sys::ScanKeyData; 2] = [Default::default(), Default::default()];
            pg_sys::ScanKeyEntryInitialize(
                &mut keys[0],
                (pg_sys::SK_ISNULL | pg_sys::SK_SEARCHNOTNULL) as i32,
                1,
                0, // InvalidStrategy: a NULL test has none
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::Datum::from(0),
            );
            let mut nkeys = 1;
            if let Some((bound, lt)) = below {
                pg_sys::ScanKeyEntryInitialize(
                    &mut keys[1],
                    0,
                    1,
                    pg_sys::BTLessStrategyNumber as u16,
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                    lt.into(),
                    bound,
                );
                nkeys = 2;
            }
            let snapshot = &raw mut pg_sys::SnapshotAnyData;
            #[cfg(feature = "pg18")]
            let scan = pg_sys::index_beginscan(heap, irel, snapshot, std::ptr::null_mut(), nkeys, 0);
            #[cfg(not(feature = "pg18"))]
            let scan = pg_sys::index_beginscan(heap, irel, snapshot, nkeys, 0);
            (*scan).xs_want_itup = true;
            pg_sys::index_rescan(scan, keys.as_mut_ptr(), nkeys, std::ptr::null_mut(), 0);
            for _ in 0..steps {
                if pg_sys::index_getnext_tid(scan, direction).is_null() {
                    break;
                }
                let key = first_key((*scan).xs_itup);
                if accept(key) {
                    // A by-reference key points into the scan's tuple; copy it out first.
                    found = Read::Found(copy_key(key, below.map_or(pg_sys::F_INT8LT, |b| b.1)));
                    break;
                }
            }
            pg_sys::index_endscan(scan);
        }
        pg_sys::relation_close(irel, pg_sys::NoLock as pg_sys::LOCKMODE);
        pg_sys::relation_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE);
        unlock();
        found
    }
}

/// The first attribute of a B-tree index tuple whose first attribute is not NULL: it starts
/// right after the header (and the null bitmap, when the tuple has one), maximally aligned.
///
/// # Safety
/// `itup` is an index tuple the scan returned, of an int8 or uuid first column.
unsafe fn first_key(itup: pg_sys::IndexTuple) -> pg_sys::Datum {
    const MAXALIGN: usize = pg_sys::MAXIMUM_ALIGNOF as usize;
    let align = |n: usize| n.div_ceil(MAXALIGN) * MAXALIGN;
    // SAFETY: the tuple lives in the scan's memory until the next call.
    unsafe {
        let header = std::mem::size_of::<pg_sys::IndexTupleData>();
        let has_nulls = u32::from((*itup).t_info) & pg_sys::INDEX_NULL_MASK != 0;
        let offset =
            if has_nulls { align(header + (pg_sys::INDEX_MAX_KEYS as usize).div_ceil(8)) } else { align(header) };
        let data = itup.cast::<u8>().add(offset);
        // int8 is passed by value on every 64-bit build; uuid by reference.
        pg_sys::Datum::from(data)
    }
}

/// A key as a value that outlives the scan: an int8 read out, a uuid copied into the current
/// memory context.
///
/// # Safety
/// `key` comes from [`first_key`]; `lt` says its type.
unsafe fn copy_key(key: pg_sys::Datum, lt: u32) -> pg_sys::Datum {
    // SAFETY: as in `first_key`; the copy is palloc'd in the current (query) context.
    unsafe {
        if lt == pg_sys::F_UUID_LT {
            let copy = pg_sys::palloc(16).cast::<u8>();
            std::ptr::copy_nonoverlapping(key.cast_mut_ptr::<u8>(), copy, 16);
            pg_sys::Datum::from(copy)
        } else {
            pg_sys::Datum::from(key.cast_mut_ptr::<i64>().read_unaligned())
        }
    }
}
