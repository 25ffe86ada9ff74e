//! The first mint in a database: its recorded id space, and the floor its stored ids set.
//!
//! Before a backend issues its first id, it reads the database's record of the id space (the
//! `snowflake_id_space` table, see `crate::core::space`) and, once per database and server
//! start, the largest id stored in every column a generator fills. The generators are raised
//! above those ids, so a restored, upgraded or cloned database never gets an id at or below one
//! it already holds, whatever the server's clock and reservation file say.
//!
//! The scan reads the catalog, then the largest value of each column through a B-tree index
//! whose first column it is (`ORDER BY column DESC LIMIT 1`: one backward index descent). Columns without such an index
//! are not scanned, with a WARNING: a sequential scan on a first insert is not something to do
//! behind a DBA's back. It runs as the bootstrap superuser (a role's privileges and row
//! security must not hide stored ids), inside a security-restricted operation with
//! `search_path = pg_catalog, pg_temp`, so no object a role created can run in it. Every name
//! is the catalog's own, quoted.
//!
//! A database whose record names another layout or epoch refuses snowflake ids (55000) on every
//! call until the settings or the record are fixed; UUIDv7, which no setting shapes, still
//! mints. The once-per-start registry is in `crate::shmem`.

use std::sync::atomic::{AtomicU8, Ordering};

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, Spi};

use crate::core::reservation::FAR_AHEAD_WARNING_MS;
use crate::core::space::{self, Recorded, UUIDV7_HORIZON_MS};
use crate::core::uuidv7;
use crate::{clock, errors, guc, shmem};

/// This backend's verdict (a backend serves one database for its whole life).
static VERDICT: AtomicU8 = AtomicU8::new(UNCHECKED);
const UNCHECKED: u8 = 0;
/// Checked: both generators may mint.
const READY: u8 = 1;
/// Checked, and the record names another id space: only UUIDv7 may mint.
const SNOWFLAKE_REFUSED: u8 = 2;

/// Whether this backend may mint snowflake ids without checking again (the fast path's test).
#[inline]
pub fn snowflake_ready() -> bool {
    VERDICT.load(Ordering::Relaxed) == READY
}

/// Checks the database before the first id this backend mints, and again on every snowflake
/// call while the record names another id space (it may have been fixed since).
///
/// # Errors
/// 55000 for snowflake ids when the record names another layout or epoch; any error of the
/// catalog queries (a lock wait cancelled, say): nothing is minted then.
pub fn ensure_checked(snowflake: bool) -> Result<(), ErrorReport> {
    match VERDICT.load(Ordering::Relaxed) {
        READY => return Ok(()),
        SNOWFLAKE_REFUSED if !snowflake => return Ok(()),
        _ => {}
    }
    let mismatch = as_catalog_reader(check)?;
    VERDICT.store(if mismatch.is_some() { SNOWFLAKE_REFUSED } else { READY }, Ordering::Relaxed);
    match mismatch {
        Some(m) if snowflake => Err(errors::space_mismatch(&m)),
        _ => Ok(()),
    }
}

/// Runs `f` as the bootstrap superuser in a security-restricted operation, with only
/// `pg_catalog` on the search path; restores both afterwards. An error on the way out is
/// cleaned up by the (sub)transaction abort, which resets both.
fn as_catalog_reader<T>(f: impl FnOnce() -> Result<T, ErrorReport>) -> Result<T, ErrorReport> {
    let (mut user, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: plain calls of PostgreSQL's user-switching and GUC-nesting API, paired below, in a
    // backend inside a transaction (a generator runs in a query).
    let nest = unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(
            pg_sys::BOOTSTRAP_SUPERUSERID.into(),
            context | (pg_sys::SECURITY_LOCAL_USERID_CHANGE | pg_sys::SECURITY_RESTRICTED_OPERATION) as i32,
        );
        let nest = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            c"pg_catalog, pg_temp".as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        nest
    };
    let out = f();
    // SAFETY: undoes exactly what was set above.
    unsafe {
        pg_sys::AtEOXact_GUC(true, nest);
        pg_sys::SetUserIdAndSecContext(user, context);
    }
    out
}

/// The record, and on the first check of this database since the start, the stored ids.
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

/// The rows of `snowflake_id_space` in the extension's schema (none when the table does not
/// exist: an installation not yet updated to 0.2.0), and a fingerprint of them, so that a
/// database whose record changed (restored into) is scanned again.
fn read_record() -> Result<(Vec<Recorded>, u32), ErrorReport> {
    Spi::connect(|client| {
        let table = client
            .select(
                "SELECT format('%I.snowflake_id_space', n.nspname)
                 FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                 WHERE e.extname = 'snowflake_id'
                   AND to_regclass(format('%I.snowflake_id_space', n.nspname)) IS NOT NULL",
                None,
                &[],
            )
            .and_then(first::<String>)?;
        let Some(table) = table else { return Ok((Vec::new(), 1)) };
        let rows = client.select(
            &format!(
                "SELECT layout, floor(extract(epoch FROM epoch) * 1000)::int8, recorded_at::text
                 FROM {table} ORDER BY recorded_at, layout, epoch"
            ),
            None,
            &[],
        )?;
        let mut recorded = Vec::new();
        // FNV-1a over the rows as read.
        let mut hash: u32 = 0x811c_9dc5;
        for row in rows {
            let layout = row.get::<String>(1)?.unwrap_or_default();
            let epoch = row.get::<i64>(2)?.unwrap_or(i64::MIN);
            let at = row.get::<String>(3)?.unwrap_or_default();
            for b in layout.bytes().chain(epoch.to_le_bytes()).chain(at.bytes()) {
                hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
            }
            recorded.push(Recorded { layout, epoch_unix_ms: epoch });
        }
        // Zero marks a free registry entry.
        Ok((recorded, hash | 1))
    })
    .map_err(spi_error)
}

/// The first column of the first row, `None` for no row or NULL.
fn first<T: IntoDatum + FromDatum>(t: pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::SpiResult<Option<T>> {
    if t.is_empty() {
        Ok(None)
    } else {
        t.first().get_one::<T>()
    }
}

/// One column a generator fills.
struct Column {
    table: String,
    column: String,
    snowflake: bool,
    indexed: bool,
}

/// Raises the generators above the largest id stored in every column whose default calls one
/// of them. Snowflake columns only when the record names the server's id space (`decode`):
/// otherwise their ids mean other times.
fn raise_above_stored(decode: bool) -> Result<(), ErrorReport> {
    let layout = guc::layout();
    // The generators' clock: the wait for stored ids ahead of it is judged on it.
    let now = clock::now_unix_ms();
    let bound = uuid_text(&space::uuidv7_search_bound(now, UUIDV7_HORIZON_MS));
    let (mut snowflake_floor, mut uuidv7_floor) = (None::<(u64, String)>, None::<(u64, String)>);
    let mut unindexed = Vec::new();
    Spi::connect(|client| {
        let columns = client
            .select(
                // Columns whose default calls a generator of this extension; a partitioned table
                // stands for its leaf partitions (which inserts through it fill with its default).
                // Only plain, permanent tables are read, each alone (ONLY): never a foreign table
                // (that would run its wrapper as superuser), never another session's temporary
                // table (which cannot be read), never a view.
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
                 SELECT c.oid::regclass::text, quote_ident(a.attname), l.snowflake,
                        EXISTS (SELECT 1 FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
                                JOIN pg_am am ON am.oid = ic.relam
                                WHERE i.indrelid = c.oid AND i.indkey[0] = a.attnum AND am.amname = 'btree'
                                  AND i.indpred IS NULL AND i.indisvalid)
                 FROM leaves l
                 JOIN pg_class c ON c.oid = l.relid AND c.relkind = 'r' AND c.relpersistence <> 't'
                 JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = l.attname AND NOT a.attisdropped
                 WHERE a.atttypid = CASE WHEN l.snowflake THEN 'int8' ELSE 'uuid' END::regtype
                 ORDER BY 1, 2",
                None,
                &[],
            )?
            .map(|row| {
                Ok(Column {
                    table: row.get::<String>(1)?.unwrap_or_default(),
                    column: row.get::<String>(2)?.unwrap_or_default(),
                    snowflake: row.get::<bool>(3)?.unwrap_or(false),
                    indexed: row.get::<bool>(4)?.unwrap_or(false),
                })
            })
            .collect::<Result<Vec<Column>, pgrx::spi::SpiError>>()?;
        for c in columns {
            if c.snowflake && !decode {
                continue;
            }
            if !c.indexed {
                unindexed.push(format!("{}.{}", c.table, c.column));
                continue;
            }
            let what = format!("{}.{}", c.table, c.column);
            if c.snowflake {
                let max = client
                    .select(
                        &format!(
                            "SELECT {0} FROM ONLY {1} WHERE {0} IS NOT NULL ORDER BY {0} DESC LIMIT 1",
                            c.column, c.table
                        ),
                        None,
                        &[],
                    )
                    .and_then(first::<i64>)?;
                if let Some(word) = max.and_then(|m| space::snowflake_floor(layout, m)) {
                    if snowflake_floor.as_ref().is_none_or(|(w, _)| word > *w) {
                        snowflake_floor = Some((word, what));
                    }
                }
            } else {
                let max = client
                    .select(
                        &format!(
                            "SELECT {0} FROM ONLY {1} WHERE {0} < '{bound}'::uuid ORDER BY {0} DESC LIMIT 1",
                            c.column, c.table
                        ),
                        None,
                        &[],
                    )
                    .and_then(first::<pgrx::Uuid>)?;
                if let Some(word) = max.and_then(|u| space::uuidv7_floor(u.as_bytes())) {
                    if uuidv7_floor.as_ref().is_none_or(|(w, _)| word > *w) {
                        uuidv7_floor = Some((word, what));
                    }
                }
            }
        }
        Ok::<(), pgrx::spi::SpiError>(())
    })
    .map_err(spi_error)?;
    if !unindexed.is_empty() {
        // For the server log only: a client inserting rows has nothing to do about it.
        errors::stored_ids_unchecked(&unindexed).report(PgLogLevel::LOG_SERVER_ONLY);
    }
    let tl = layout.timeline();
    for (floor, tl, what) in [
        snowflake_floor.as_ref().map(|(w, what)| (*w, tl, what)),
        uuidv7_floor.as_ref().map(|(w, what)| (*w, uuidv7::TIMELINE, what)),
    ]
    .into_iter()
    .flatten()
    {
        let ahead_ms = tl.word_unix_ms(floor).saturating_sub(now);
        if ahead_ms > FAR_AHEAD_WARNING_MS {
            errors::stored_ids_ahead(what, ahead_ms).report(PgLogLevel::WARNING);
        }
    }
    shmem::raise_to_words(layout, snowflake_floor.map(|f| f.0), uuidv7_floor.map(|f| f.0), now);
    Ok(())
}

fn uuid_text(u: &[u8; 16]) -> String {
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}
