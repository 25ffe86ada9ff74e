//! A database's record of its id space, and the floor it carries for the ids it may hold.
//!
//! Before a backend issues its first id, it reads the database's record (the
//! `snowflake_id_space` table, see `crate::core::space`), and again whenever any database's record
//! changed since (the table's trigger bumps a counter in shared memory). Once per database and
//! server start, and again when its record changes, the first id in that database waits until the
//! clock passes the record's floor (`minted_before`), unless every generator is past it already,
//! so that a restored, upgraded or cloned database never gets an id at or below one it holds,
//! whatever the server's clock says. It waits in that database only: the generators, which every
//! database shares, are never moved for one database's record. And before any id at or past the
//! floor it knows is handed out, it advances the floor to the server's durable reservation
//! ([`cover`]), so that the floor a dump or `pg_upgrade` carries lies above every id in the data.
//!
//! # What is read and written, and by whom
//! Only the extension's own table, `snowflake_id_private.snowflake_id_space` (in a schema that
//! `PUBLIC` may not use and only superusers write into; before the update to 0.3.0, the extension's
//! member of that name), and only its rows; no user table, index or role's code is ever read or
//! run. It is read with a heap scan under a fresh catalog snapshot, so that a statement (or a
//! repeatable-read transaction) that began before a change committed still sees it, since the
//! change's notice (`shmem::space_generation`) is consumed by this check. The floor is written in
//! place (`systable_inplace_update_begin`/`_finish`, as PostgreSQL updates
//! `pg_class.relfrozenxid`): without a transaction id, in read-only transactions too, WAL-logged,
//! and visible at once to every snapshot, a dump's included. Only superusers (and members of
//! `pg_write_all_data`) may write the table otherwise (a restore adds the dumped rows), so no other
//! role's data or calls can move the floor. The in-place API (`systable_inplace_update_*`) came with
//! PostgreSQL 17.1, 16.5, 15.9 and 14.14; it is looked up when first needed, so that the library
//! loads on older minor releases too, where the floor is then not advanced (a WARNING says so).
//!
//! # Never waiting, never failing an id
//! The record is read under `ACCESS SHARE` taken only when it is free: a session holding a lock
//! with a stronger request queued behind it (a `PREPARE` locks a table before its privileges are
//! checked, and `CREATE RULE` asks for ACCESS EXCLUSIVE before it checks ownership; a role that may
//! name the table, or a superuser's maintenance queued behind any role's lock) would otherwise hold
//! up the first id of every new session. It is found through the system caches, not a query of
//! `pg_extension` or `pg_depend`, whose lock queues any role can form. When the lock is not free, a
//! new session uses the last good check of its database that another backend left in shared memory
//! (`shmem::remembered_verdict`), if no record changed since; without one, it tries again every few
//! milliseconds for as long as a call may wait, then fails with 55P03.
//! Likewise, while a transaction that changed the database's record runs (a restore loading the
//! dumped rows), the database's checks wait for it on their latch, as long as a call may wait, then
//! fail with 55P03 (`wait_for_record_changes`).
//! The write takes `ROW EXCLUSIVE` on the table only if that is free at once, and skips a row that
//! an open transaction is changing (only a superuser can): then the id is issued anyway, with one
//! WARNING a backend, and the next id past the floor tries again. The generators are PARALLEL
//! UNSAFE, since nothing may be written in parallel mode; in a function a user marks parallel safe
//! around them, an id past the floor fails with 25000 (`errors::floor_in_parallel_mode`).
//! A backend whose write did not happen also lets the reservation's current value stand for the
//! floor until it is renewed, so that a skipped write costs one attempt a renewal, not one a call.
//!
//! A database whose record names another layout or epoch refuses snowflake ids (55000) until
//! the settings or the record are fixed; UUIDv7, which no setting shapes, still mints. The
//! registry of databases checked since the start and the record counter are in `crate::runtime::shmem`.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{register_xact_callback, PgLogLevel, PgXactCallbackEvent, Spi};

use crate::core::monotonic::Timeline;
use crate::core::space::{self, FloorWait, MintedBefore, Recorded};
use crate::core::time;
use crate::core::uuidv7;
use crate::runtime::{clock, errors, guc, restricted, shmem};

/// This backend's verdict (a backend serves one database for its whole life).
static VERDICT: AtomicU8 = AtomicU8::new(UNCHECKED);
const UNCHECKED: u8 = 0;
/// Checked: both generators may mint.
const READY: u8 = 1;
/// Checked, and the record names another id space: only UUIDv7 may mint.
const SNOWFLAKE_REFUSED: u8 = 2;
/// The record counter (`shmem::space_generation`) when this backend last checked.
static CHECKED_AT: AtomicU64 = AtomicU64::new(u64::MAX);
/// The record table's OID, 0 when the database has none with a floor column.
static RECORD_TABLE: AtomicU32 = AtomicU32::new(0);
/// The Unix millisecond below which this backend may hand out ids without advancing the floor:
/// the floor as it last read or wrote it. `i64::MAX` where there is no floor to keep.
static FLOOR_KNOWN: AtomicI64 = AtomicI64::new(i64::MIN);
/// Set once this backend's database is known to hold no id past the generators since the start
/// (this backend waited out the horizon for a row whose floor is unknown, or found the database
/// checked already, by such a wait or by `CREATE EXTENSION` here): it may then replace the row's
/// `infinity` with a reservation of its own.
static UNKNOWN_WAITED: AtomicBool = AtomicBool::new(false);
/// Whether this backend already warned that it could not advance the floor.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Whether this backend may mint snowflake ids without checking again (the fast path's test).
#[inline]
pub fn snowflake_checked() -> bool {
    VERDICT.load(Ordering::Relaxed) == READY && CHECKED_AT.load(Ordering::Relaxed) == shmem::space_generation()
}

/// The Unix millisecond below which ids may be handed out without advancing the database's floor.
#[inline]
pub fn floor_known() -> i64 {
    FLOOR_KNOWN.load(Ordering::Relaxed)
}

/// After a change to the record (the trigger `snowflake_id_space_changed`): tells every backend to
/// read its database's record again, now and once more when the transaction commits (what
/// backends read before the commit is the old record). It fires also where triggers are for
/// replicas only (`ENABLE ALWAYS`): logical replication applying a change.
///
/// # Safety
/// `fcinfo` is the call's, as PostgreSQL's fmgr passes it.
///
/// # Panics
/// 39P01 when called other than as a trigger, or as a trigger on another table; 0A000 at PREPARE
/// of a transaction that changed the record.
pub unsafe fn record_changed(fcinfo: pg_sys::FunctionCallInfo) {
    /// Whether this transaction already has its end-of-transaction callbacks.
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    // SAFETY: the trigger manager passes its TriggerData as the call's context; a direct call has
    // none (or another node), and must not make every backend read its record again.
    let as_trigger = unsafe {
        let context = (*fcinfo).context;
        !context.is_null() && (*context).type_ == pg_sys::NodeTag::T_TriggerData
    };
    if !as_trigger {
        errors::raise(errors::not_called_as_trigger("snowflake_id_space_changed"));
    }
    // Only on the record: 0.2.0 let PUBLIC attach the function to any table of its own, and such
    // a trigger outlives the REVOKE, so every insert there would make every backend of the server
    // read its record again. The record is snowflake_id_private.snowflake_id_space (only
    // superusers create in that schema) or, before the update to 0.3.0, the extension's member of
    // that name.
    // SAFETY: the trigger manager's TriggerData, with the relation it fires on, open; syscache
    // and pg_depend lookups in a statement that writes the table.
    let on_record = unsafe {
        let rel = (*((*fcinfo).context as *mut pg_sys::TriggerData)).tg_relation;
        let form = (*rel).rd_rel;
        let schema = pg_sys::get_namespace_name((*form).relnamespace);
        let member_of = |ext: pg_sys::Oid| {
            ext != pg_sys::InvalidOid && pg_sys::getExtensionOfObject(pg_sys::RelationRelationId, (*rel).rd_id) == ext
        };
        std::ffi::CStr::from_ptr((*form).relname.data.as_ptr()) == c"snowflake_id_space"
            && ((!schema.is_null() && std::ffi::CStr::from_ptr(schema) == c"snowflake_id_private")
                || member_of(pg_sys::get_extension_oid(c"snowflake_id".as_ptr(), true)))
    };
    if !on_record {
        errors::raise(errors::trigger_not_on_record("snowflake_id_space_changed"));
    }
    // The INSERT of CREATE EXTENSION's script: into snowflake_id_private.snowflake_id_space, created
    // in this very transaction. (An update script's INSERT, as from 0.1.0 to 0.2.0, went into a
    // record in the extension's schema, which may sit beside ids from anywhere.)
    // SAFETY: the trigger manager's TriggerData and relation, as above; creating_extension is set
    // while an extension's script runs.
    let creating = unsafe {
        let data = (*fcinfo).context as *mut pg_sys::TriggerData;
        let rel = (*data).tg_relation;
        let schema = pg_sys::get_namespace_name((*(*rel).rd_rel).relnamespace);
        pg_sys::creating_extension
            && (*data).tg_event & pg_sys::TRIGGER_EVENT_OPMASK == pg_sys::TRIGGER_EVENT_INSERT
            && (*rel).rd_createSubid != 0 // InvalidSubTransactionId: created in this transaction
            && !schema.is_null()
            && std::ffi::CStr::from_ptr(schema) == RECORD_SCHEMA
    };
    if creating {
        created_here();
    }
    // Before the announcement: every backend that reads its record because of it finds this
    // transaction, and waits for it to end (`wait_for_record_changes`).
    // SAFETY: a plain read of this backend's database, and the top transaction's id, which
    // GetTopTransactionId assigns if the transaction has none yet (a statement trigger after a
    // DELETE that matched no row): an id the transaction would not otherwise take, and harmless.
    let (database, xid) = unsafe { (u32::from(pg_sys::MyDatabaseId), pg_sys::GetTopTransactionId().into_inner()) };
    if !shmem::note_record_change(database, xid, transaction_running) {
        errors::raise(errors::too_many_record_changes());
    }
    shmem::bump_space_generation();
    if !REGISTERED.swap(true, Ordering::Relaxed) {
        // The commit's announcement, then the entry cleared: a backend that waited for this
        // transaction reads the record once it is gone, and the commit is visible by then.
        register_xact_callback(PgXactCallbackEvent::Commit, move || {
            shmem::bump_space_generation();
            shmem::clear_record_change(database, xid);
            REGISTERED.store(false, Ordering::Relaxed);
        });
        register_xact_callback(PgXactCallbackEvent::Abort, move || {
            shmem::clear_record_change(database, xid);
            REGISTERED.store(false, Ordering::Relaxed);
        });
        // COMMIT PREPARED runs no callback of this backend: the notice at commit would be lost.
        register_xact_callback(PgXactCallbackEvent::PrePrepare, || {
            errors::raise(errors::space_change_prepared());
        });
    }
}

/// Checks the database before the first id this backend mints, after any record changed, and
/// on every snowflake call while the record names another id space.
///
/// # Errors
/// 55000 for snowflake ids when the record names another layout or epoch; any error of the
/// catalog query: nothing is minted then.
pub fn ensure_checked(snowflake: bool) -> Result<(), ErrorReport> {
    let generation = shmem::space_generation();
    if CHECKED_AT.load(Ordering::Relaxed) == generation {
        match VERDICT.load(Ordering::Relaxed) {
            READY => return Ok(()),
            SNOWFLAKE_REFUSED if !snowflake => return Ok(()),
            _ => {}
        }
    }
    let mismatch = restricted::with_catalog_search_path(|| check(generation))?;
    VERDICT.store(if mismatch.is_some() { SNOWFLAKE_REFUSED } else { READY }, Ordering::Relaxed);
    // The counter read before the check: a change committed meanwhile is seen at the next call.
    CHECKED_AT.store(generation, Ordering::Relaxed);
    match mismatch {
        Some(m) if snowflake => Err(errors::space_mismatch(&m)),
        _ => Ok(()),
    }
}

/// Whether transaction `xid` is still running (not committed, not aborted).
fn transaction_running(xid: u32) -> bool {
    // SAFETY: a plain query of the proc array.
    unsafe { pg_sys::TransactionIdIsInProgress(pg_sys::TransactionId::from_inner(xid)) }
}

/// Waits until no other transaction is changing this database's record (a restore loading the
/// dumped rows, a superuser's UPDATE), for as long as a call may wait for the clock: until then the
/// record read would be the old one, and the new rows become visible a moment before their commit
/// announces them. A change still running after that fails the call (55P03), in this database
/// only; later calls wait again. This backend's own change is its own to see.
fn wait_for_record_changes(database: u32) -> Result<(), ErrorReport> {
    // SAFETY: a plain read of this backend's transaction id, if it has one.
    let own = unsafe { pg_sys::GetTopTransactionIdIfAny().into_inner() };
    let others = || shmem::record_changes(database, transaction_running).into_iter().filter(|&x| x != own).max();
    let Some(mut xid) = others() else { return Ok(()) };
    let budget = std::time::Duration::from_millis(u64::from(guc::clock_policy().max_wait_ms));
    let started = std::time::Instant::now();
    loop {
        if started.elapsed() >= budget {
            return Err(errors::record_change_running(xid, budget.as_millis()));
        }
        clock::wait_on_latch_ms(5);
        match others() {
            Some(x) => xid = x,
            None => return Ok(()),
        }
    }
}

/// The record, and on the first check of this database since the start (or since its record
/// changed), the wait for its floor. `generation` is the record counter read before.
fn check(generation: u64) -> Result<Option<space::Mismatch>, ErrorReport> {
    let layout = guc::layout();
    // SAFETY: a plain read of this backend's database, set at connection.
    let database = u32::from(unsafe { pg_sys::MyDatabaseId });
    // Whether this backend may replace an unknown floor is decided again for each record read.
    UNKNOWN_WAITED.store(false, Ordering::Relaxed);
    wait_for_record_changes(database)?;
    let (recorded, fingerprint) = match read_record(database, generation)? {
        Record::Read(recorded, fingerprint) => (recorded, fingerprint),
        // The table is locked, and another backend checked this record since it last changed.
        Record::Remembered(good) => {
            RECORD_TABLE.store(good.table, Ordering::Relaxed);
            FLOOR_KNOWN.store(good.floor_unix_ms, Ordering::Relaxed);
            return Ok(None);
        }
    };
    let mismatch = space::judge(&recorded, layout).err();
    let floor = space::floor(&recorded);
    FLOOR_KNOWN.store(
        match floor {
            _ if RECORD_TABLE.load(Ordering::Relaxed) == 0 => i64::MAX,
            space::Floor { unknown: true, .. } | space::Floor { latest: None, .. } => i64::MIN,
            space::Floor { latest: Some(ms), .. } => ms,
        },
        Ordering::Relaxed,
    );
    if shmem::database_checked(fingerprint) {
        // Checked since the start, by a wait past its floor or because CREATE EXTENSION made the
        // record here: every id the database holds lies below the generators, so this backend
        // may replace an unknown floor with its reservation (else the first id after a restart
        // waits out the horizon for a floor that was never written).
        UNKNOWN_WAITED.store(true, Ordering::Relaxed);
    } else {
        wait_for_floor(floor, mismatch.is_none())?;
        // Only once the wait is over: another session of this database checking meanwhile
        // waits too.
        shmem::mark_database_checked(database, fingerprint);
    }
    if mismatch.is_none() {
        let good = shmem::GoodCheck {
            fingerprint,
            table: RECORD_TABLE.load(Ordering::Relaxed),
            floor_unix_ms: FLOOR_KNOWN.load(Ordering::Relaxed),
        };
        shmem::remember_verdict(database, generation, good);
    }
    Ok(mismatch)
}

/// What [`read_record`] found.
enum Record {
    /// The rows, and their fingerprint.
    Read(Vec<Recorded>, u64),
    /// The table was locked: the last good check of this database since its record last changed.
    Remembered(shmem::GoodCheck),
}

/// Waits, in this database's session only, until the clock passes the database's floor
/// (`crate::core::space::wait_target`), unless every generator already lies past it (a restart
/// starts them at the reservation, which lies past every floor this server wrote). The
/// generators are raised to the floor only once the clock has passed it: every database shares
/// them, and one database's record must not make another database's ids wait. The snowflake
/// generators count only when the record names the server's id space, since otherwise its times
/// mean nothing here. A floor further ahead than a call may wait fails the call (58000), and the
/// database stays unchecked, so that every later call looks again.
fn wait_for_floor(floor: space::Floor, snowflake: bool) -> Result<(), ErrorReport> {
    if cfg!(any(feature = "sabotage-no-reservation", feature = "sabotage-no-replay")) {
        return Ok(());
    }
    let layout = guc::layout();
    let now = clock::now_unix_ms();
    // As far as a call of either kind may wait: a floor this server wrote covers UUIDv7 ahead of
    // the clock too.
    let horizon = space::horizon_ms(&guc::clock_policy()).max(space::horizon_ms(&guc::uuidv7_clock_policy()));
    let tl = Timeline::of(layout);
    let words_at = |ms: i64| (snowflake.then(|| tl.first_word_at(ms)), uuidv7::TIMELINE.first_word_at(ms));
    let to = match space::wait_target(floor, now, horizon) {
        FloorWait::None => return Ok(()),
        FloorWait::To(ms) => ms,
        // Further ahead than a call may wait: refuse, in this database only, rather than mint
        // below ids it may hold; unless the generators are past the floor already.
        FloorWait::Beyond { floor } => {
            let (snowflake_word, uuidv7_word) = words_at(floor);
            if shmem::generators_at_least(snowflake_word, uuidv7_word) {
                return Ok(());
            }
            return Err(errors::floor_beyond_horizon(floor, now, horizon));
        }
    };
    let (snowflake_word, uuidv7_word) = words_at(to);
    if !shmem::generators_at_least(snowflake_word, uuidv7_word) {
        // Until the first tick that starts at or after the floor: the floor's own tick may hold
        // ids (a reservation covers the ticks that start before it).
        // (At most one tick later: outside the layout's time, before its epoch or past its end,
        // there is no such tick, and the floor itself is waited for.)
        let until = snowflake_word
            .map(|w| tl.word_unix_ms(w))
            .filter(|&t| t >= to && t <= to.saturating_add(i64::from(tl.tick_ms)))
            .unwrap_or(to);
        sleep_until(until);
        // The clock is past the floor now, so raising the generators to it makes no one wait,
        // and a later step back of the clock cannot bring an idle generator below it.
        shmem::raise_generators(layout, until, clock::now_unix_ms());
    }
    if floor.unknown {
        UNKNOWN_WAITED.store(true, Ordering::Relaxed);
    }
    Ok(())
}

/// Sleeps until the generators' clock reads `unix_ms`.
fn sleep_until(unix_ms: i64) {
    loop {
        let left = unix_ms.saturating_sub(clock::now_unix_ms());
        if left <= 0 {
            return;
        }
        clock::wait_on_latch_ms(left.min(100).unsigned_abs());
    }
}

/// The rows of the extension's own `snowflake_id_space` table ([`find_record_table`]; none
/// before an update to 0.2.0), and a fingerprint of their layouts, epochs and record times (not
/// their floors, which the extension advances itself), so that a database whose record changed is
/// waited for again.
fn read_record(database: u32, generation: u64) -> Result<Record, ErrorReport> {
    let table = match find_record_table(database, generation)? {
        Found::Table(table) => table,
        Found::Remembered(good) => return Ok(Record::Remembered(good)),
        Found::None => {
            RECORD_TABLE.store(0, Ordering::Relaxed);
            return Ok(Record::Read(Vec::new(), space::fingerprint(database, Vec::new())));
        }
    };
    let mut recorded = Vec::new();
    let mut identities: Vec<space::Identity> = Vec::new();
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: PostgreSQL's table and system-scan API, used as its callers do; a NULL snapshot
    // makes systable_beginscan take a fresh catalog snapshot (always fresh for a table that is
    // not a catalog). Errors abort the transaction, which closes the scan and the table.
    unsafe {
        if !pg_sys::ConditionalLockRelationOid(table, lock) {
            // The remembered check counts only for the table found now (a record dropped and
            // created again is another table).
            if let Some(good) = shmem::remembered_verdict(database, generation).filter(|g| g.table == u32::from(table))
            {
                return Ok(Record::Remembered(good));
            }
            retry_locks(&[u32::from(table)], lock)?;
        }
        let rel = pg_sys::try_relation_open(table, pg_sys::NoLock as pg_sys::LOCKMODE);
        if rel.is_null() {
            pg_sys::UnlockRelationOid(table, lock);
            return Err(errors::space_record_altered());
        }
        let desc = pgrx::PgTupleDesc::from_pg_unchecked((*rel).rd_att);
        let types: Vec<pg_sys::Oid> = (0..desc.len()).filter_map(|i| desc.get(i)).map(|a| a.atttypid).collect();
        if types.get(..3) != Some(&[pg_sys::TEXTOID, pg_sys::TIMESTAMPTZOID, pg_sys::TIMESTAMPTZOID][..]) {
            pg_sys::table_close(rel, lock);
            return Err(errors::space_record_altered());
        }
        let has_floor = has_floor_column(&desc);
        RECORD_TABLE.store(if has_floor { u32::from(table) } else { 0 }, Ordering::Relaxed);
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
            let pg_us = |i: usize| (!nulls[i]).then(|| values[i].value() as i64);
            let unix_us = |i: usize| pg_us(i).and_then(time::unix_us_from_pg_us);
            let epoch = unix_us(1).map_or(i64::MIN, |us| us.div_euclid(1000));
            let at = unix_us(2).unwrap_or(i64::MIN);
            // The row version: the extension's own floor writes are in place and keep it; any
            // other write (an UPDATE, the merge of a row loaded again, a TRUNCATE and reload)
            // makes a new one, so that the database is waited for again.
            let xmin = (*(*tuple).t_data).t_choice.t_heap.t_xmin.into_inner();
            identities.push((layout.clone(), epoch, at, xmin));
            let minted_before =
                if has_floor { minted_before(pg_us(FLOOR_COLUMN as usize - 1)) } else { MintedBefore::Unknown };
            recorded.push(Recorded { layout, epoch_unix_ms: epoch, minted_before });
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, lock);
    }
    // The same rows in another order (an UPDATE or VACUUM FULL moves them) are the same record.
    recorded.sort_by(|a, b| (&a.layout, a.epoch_unix_ms).cmp(&(&b.layout, b.epoch_unix_ms)));
    Ok(Record::Read(recorded, space::fingerprint(database, identities)))
}

/// The row `CREATE EXTENSION` writes into a new record (the server's layout and epoch, the
/// transaction's start, an unknown floor): a record made on this server, in this run, under which
/// the database can hold no id but this server's, and those lie below its generators. Its first
/// id need not wait for the unknown floor, so it counts as checked, under the fingerprint the new
/// record will have. A record that changes afterwards (a restore adds the dumped rows) has another
/// fingerprint, and is waited for. Its first id writes a floor in place of the unknown one, so a
/// restart waits for that floor, not for the horizon.
fn created_here() {
    let layout = guc::layout();
    // SAFETY: plain reads of this backend's database, of the transaction's start, which is what
    // the row's recorded_at (DEFAULT now()) holds, and of the (sub)transaction that inserted the
    // row (its xmin), which the statement's write gave an id.
    let (database, start_pg_us, xmin) = unsafe {
        (
            u32::from(pg_sys::MyDatabaseId),
            pg_sys::GetCurrentTransactionStartTimestamp(),
            pg_sys::GetCurrentTransactionId().into_inner(),
        )
    };
    if let Some(at) = time::unix_us_from_pg_us(start_pg_us) {
        let row = (layout.widths().to_string(), layout.epoch_unix_ms(), at, xmin);
        shmem::mark_database_checked(database, space::fingerprint(database, vec![row]));
    }
}

/// What [`find_record_table`] found.
enum Found {
    Table(pg_sys::Oid),
    /// No record (a database still at 0.1.0).
    None,
    /// The catalogs were locked: the last good check of this database since its record changed.
    Remembered(shmem::GoodCheck),
}

/// The schema `CREATE EXTENSION` makes for the record, which `PUBLIC` may not use.
const RECORD_SCHEMA: &std::ffi::CStr = c"snowflake_id_private";
const RECORD_NAME: &std::ffi::CStr = c"snowflake_id_space";

/// The record table. Since 0.3.0 it is `snowflake_id_private.snowflake_id_space`, found by name
/// through the system caches, as any statement finds a table (and owned by a superuser, as
/// `CREATE EXTENSION` makes it: a database owner's own schema of that name before the update is
/// not the record). Before the update to 0.3.0, it is the extension's member of that name, which a
/// catalog query finds; the catalogs it reads are locked first only when that is free, as the
/// record is (a `CREATE RULE` on `pg_extension` queues before it checks ownership).
fn find_record_table(database: u32, generation: u64) -> Result<Found, ErrorReport> {
    // SAFETY: syscache lookups by name and OID, as the parser's.
    unsafe {
        let schema = pg_sys::get_namespace_oid(RECORD_SCHEMA.as_ptr(), true);
        if schema != pg_sys::InvalidOid {
            let table = pg_sys::get_relname_relid(RECORD_NAME.as_ptr(), schema);
            if table != pg_sys::InvalidOid
                && pg_sys::get_rel_relkind(table) == pg_sys::RELKIND_RELATION as std::ffi::c_char
                && owned_by_superuser(table)
            {
                return Ok(Found::Table(table));
            }
        }
    }
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    if !lock_all_at_once(MEMBER_QUERY_CATALOGS, lock) {
        if let Some(good) = shmem::remembered_verdict(database, generation) {
            return Ok(Found::Remembered(good));
        }
        retry_locks(MEMBER_QUERY_CATALOGS, lock)?;
    }
    let table = Spi::connect(|client| {
        let t = client.select(
            "SELECT c.oid
             FROM pg_extension e
             JOIN pg_depend d ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
                             AND d.deptype = 'e' AND d.classid = 'pg_class'::regclass
             JOIN pg_class c ON c.oid = d.objid AND c.relname = 'snowflake_id_space' AND c.relkind = 'r'
             WHERE e.extname = 'snowflake_id'",
            None,
            &[],
        )?;
        if t.is_empty() {
            Ok(None)
        } else {
            t.first().get_one::<pg_sys::Oid>()
        }
    })
    .map_err(errors::catalog_query)?;
    Ok(table.map_or(Found::None, Found::Table))
}

/// The catalogs the query for the extension's member reads, and every index of theirs its
/// planner opens: `pg_extension` (3080, 3081), `pg_depend` (2673, 2674), `pg_class` (2662, 2663,
/// 3455). Their OIDs are fixed in every major. (Planning also reads the catalogs every query's
/// planning reads, through the caches, as any statement in the database does.)
const MEMBER_QUERY_CATALOGS: &[u32] = &[3079, 3080, 3081, 2608, 2673, 2674, 1259, 2662, 2663, 3455];

/// Whether the relation's owner is a superuser.
///
/// # Safety
/// A syscache lookup; call inside a transaction.
unsafe fn owned_by_superuser(table: pg_sys::Oid) -> bool {
    // SAFETY: a syscache tuple of pg_class, read and released.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RELOID as c_int, pg_sys::Datum::from(table));
        if tuple.is_null() {
            return false;
        }
        let owner = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tuple)).relowner;
        pg_sys::ReleaseSysCache(tuple);
        pg_sys::superuser_arg(owner)
    }
}

/// Takes `lock` on each of `oids` that is free at once, without joining any lock queue; whether
/// all were.
fn lock_all_at_once(oids: &[u32], lock: pg_sys::LOCKMODE) -> bool {
    // SAFETY: PostgreSQL's relation-lock API; a lock taken here is released at the end of the
    // transaction (a lock already held is taken again at once).
    oids.iter().all(|&oid| unsafe { pg_sys::ConditionalLockRelationOid(pg_sys::Oid::from(oid), lock) })
}

/// Takes `lock` on the relations without joining their lock queues, once the caller found one
/// not free and no good check of this database remembered: tries again every few milliseconds for
/// as long as a call may wait (`snowflake_id.max_rewind_wait`).
///
/// # Errors
/// 55P03 when a lock stays taken that long.
fn retry_locks(oids: &[u32], lock: pg_sys::LOCKMODE) -> Result<(), ErrorReport> {
    let budget = std::time::Duration::from_millis(u64::from(guc::clock_policy().max_wait_ms));
    let started = std::time::Instant::now();
    while started.elapsed() < budget {
        clock::wait_on_latch_ms(5);
        if lock_all_at_once(oids, lock) {
            return Ok(());
        }
    }
    Err(errors::space_record_locked(budget.as_millis()))
}

/// The floor's column: the fourth, `minted_before timestamptz`.
const FLOOR_COLUMN: i16 = 4;

fn has_floor_column(desc: &pgrx::PgTupleDesc<'_>) -> bool {
    desc.get(FLOOR_COLUMN as usize - 1)
        .is_some_and(|a| !a.attisdropped && a.atttypid == pg_sys::TIMESTAMPTZOID && a.name() == "minted_before")
}

/// A row's floor from its `minted_before` (PostgreSQL microseconds; NULL, which the column
/// forbids, reads as unknown).
fn minted_before(pg_us: Option<i64>) -> MintedBefore {
    match pg_us {
        Some(i64::MIN) => MintedBefore::Nothing,
        None | Some(i64::MAX) => MintedBefore::Unknown,
        // Rounded up: a floor given to the microsecond lies after every id of its millisecond.
        Some(us) => time::unix_us_from_pg_us(us).map_or(MintedBefore::Unknown, |u| {
            MintedBefore::At(u.div_euclid(1000) + i64::from(u.rem_euclid(1000) != 0))
        }),
    }
}

type InplaceBegin = unsafe extern "C-unwind" fn(
    pg_sys::Relation,
    pg_sys::Oid,
    bool,
    pg_sys::Snapshot,
    c_int,
    *const pg_sys::ScanKeyData,
    *mut pg_sys::HeapTuple,
    *mut *mut c_void,
);
type InplaceFinish = unsafe extern "C-unwind" fn(*mut c_void, pg_sys::HeapTuple);
type InplaceCancel = unsafe extern "C-unwind" fn(*mut c_void);

/// PostgreSQL's in-place update API, found in the server at run time: a library that named it
/// directly would not load at all on a minor release before it existed.
struct Inplace {
    begin: InplaceBegin,
    finish: InplaceFinish,
    cancel: InplaceCancel,
}

fn inplace() -> Option<&'static Inplace> {
    static INPLACE: OnceLock<Option<Inplace>> = OnceLock::new();
    INPLACE
        .get_or_init(|| {
            let find = |name: &std::ffi::CStr| {
                // SAFETY: dlsym on the process's global namespace, where the server's symbols are.
                let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
                (!p.is_null()).then_some(p)
            };
            let (begin, finish, cancel) = (
                find(c"systable_inplace_update_begin")?,
                find(c"systable_inplace_update_finish")?,
                find(c"systable_inplace_update_cancel")?,
            );
            // SAFETY: each is the server's function of that name, whose signature is declared above
            // as genam.h declares it.
            unsafe {
                Some(Inplace {
                    begin: std::mem::transmute::<*mut c_void, InplaceBegin>(begin),
                    finish: std::mem::transmute::<*mut c_void, InplaceFinish>(finish),
                    cancel: std::mem::transmute::<*mut c_void, InplaceCancel>(cancel),
                })
            }
        })
        .as_ref()
}

/// Advances the database's floor to `until_unix_ms` (the server's durable reservation, which every
/// id handed out lies below) before an id at or past the floor this backend knows is handed out.
/// For a write it cannot make it warns once and lets `until` stand for the floor in this backend
/// (see the module comment).
///
/// # Panics
/// 25000 in parallel mode (a generator inside a function a user marked parallel safe); an ERROR
/// from PostgreSQL while writing (none is expected) propagates as any error does.
pub fn cover(until_unix_ms: i64) {
    let table = RECORD_TABLE.load(Ordering::Relaxed);
    if table == 0 {
        FLOOR_KNOWN.store(i64::MAX, Ordering::Relaxed);
        return;
    }
    match write_floor(pg_sys::Oid::from(table), until_unix_ms) {
        Ok(floor) => {
            FLOOR_KNOWN.fetch_max(floor, Ordering::Relaxed);
        }
        Err(why) => {
            if !WARNED.swap(true, Ordering::Relaxed) {
                errors::floor_not_written(why).report(PgLogLevel::WARNING);
            }
            FLOOR_KNOWN.fetch_max(until_unix_ms, Ordering::Relaxed);
        }
    }
}

/// Writes `until` into every row whose floor is earlier (and into rows whose floor is unknown,
/// once this backend waited past it), returning the floor now recorded.
fn write_floor(table: pg_sys::Oid, until_unix_ms: i64) -> Result<i64, &'static str> {
    // SAFETY: a plain read of the transaction's state.
    if unsafe { pg_sys::IsInParallelMode() } {
        // The generators are PARALLEL UNSAFE, so only a function a user marked parallel safe
        // around them gets here. PostgreSQL refuses writes in parallel mode, and so does this:
        // issuing ids past a floor that cannot be written would leave it behind indefinitely.
        errors::raise(errors::floor_in_parallel_mode());
    }
    let Some(until_pg_us) = until_unix_ms.checked_mul(1000).and_then(time::pg_us_from_unix_us) else {
        return Err("the reservation is outside PostgreSQL's timestamps");
    };
    let Some(api) = inplace() else {
        return Err("this PostgreSQL minor release has no in-place update API (14.14, 15.9, 16.5, 17.1 or later has)");
    };
    let lock = pg_sys::RowExclusiveLock as pg_sys::LOCKMODE;
    // SAFETY: PostgreSQL's relation-lock, in-place-update and tuple API, used as its own callers
    // do (vac_update_relstats, for one): lock, open, find the tuple under a fresh catalog
    // snapshot, lock it in place, write the new tuple of the same length, unlock. Errors abort
    // the transaction, which releases the locks and ends the scan.
    unsafe {
        if !pg_sys::ConditionalLockRelationOid(table, lock) {
            return Err("another session holds a lock on snowflake_id_space");
        }
        let rel = pg_sys::try_relation_open(table, pg_sys::NoLock as pg_sys::LOCKMODE);
        if rel.is_null() {
            pg_sys::UnlockRelationOid(table, lock);
            return Err("snowflake_id_space was dropped");
        }
        let desc = pgrx::PgTupleDesc::from_pg_unchecked((*rel).rd_att);
        let mut outcome = if has_floor_column(&desc) { Ok(until_unix_ms) } else { Err("its column is gone") };
        if outcome.is_ok() {
            // Rows earlier than `until`, then, if this backend may, rows whose floor is unknown.
            let mut passes = vec![(pg_sys::BTLessStrategyNumber, pg_sys::F_TIMESTAMPTZ_LT, until_pg_us)];
            // Only under the record this backend checked: one changed since (a restore committed
            // while this call waited) may hold a floor this backend knows nothing of.
            if UNKNOWN_WAITED.load(Ordering::Relaxed) && CHECKED_AT.load(Ordering::Relaxed) == shmem::space_generation()
            {
                passes.push((pg_sys::BTEqualStrategyNumber, pg_sys::F_TIMESTAMPTZ_EQ, i64::MAX));
            }
            'passes: for (strategy, function, value) in passes {
                // At most a few rows; a bound keeps a row that somehow keeps matching from looping.
                for _ in 0..16 {
                    match write_one(api, rel, strategy as u16, function, value, until_pg_us) {
                        Step::Wrote => {}
                        Step::Done => continue 'passes,
                        Step::Busy => {
                            outcome = Err("a transaction is changing snowflake_id_space");
                            break 'passes;
                        }
                        Step::Old => {
                            outcome = Err("a row of snowflake_id_space cannot be rewritten in place (its columns are \
                                not the extension's; run ALTER EXTENSION snowflake_id UPDATE)");
                            break 'passes;
                        }
                    }
                }
            }
        }
        pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        pg_sys::UnlockRelationOid(table, lock);
        outcome
    }
}

/// What one in-place write did.
enum Step {
    /// A row matching the key was advanced.
    Wrote,
    /// No row matches the key any more.
    Done,
    /// The matching row is being changed by an open transaction: writing would wait for it.
    Busy,
    /// The matching row cannot be rewritten in place: written before the column existed (fewer
    /// attributes), or a column added since would change its length.
    Old,
}

/// Advances the first row whose floor matches `floor <op> value` to `until_pg_us`.
///
/// # Safety
/// `rel` is the open record table, locked `ROW EXCLUSIVE` by this backend.
unsafe fn write_one(
    api: &Inplace,
    rel: pg_sys::Relation,
    strategy: u16,
    function: u32,
    value: i64,
    until_pg_us: i64,
) -> Step {
    // SAFETY: as in write_floor.
    unsafe {
        let key = || {
            let mut key: pg_sys::ScanKeyData = Default::default();
            pg_sys::ScanKeyInit(&mut key, FLOOR_COLUMN, strategy, function.into(), pg_sys::Datum::from(value));
            key
        };
        // heap_inplace_lock waits for a transaction that is changing the row; such a row (only a
        // superuser can change one) is skipped rather than waited for.
        let mut probe = key();
        let scan = pg_sys::systable_beginscan(rel, pg_sys::InvalidOid, false, std::ptr::null_mut(), 1, &mut probe);
        let tuple = pg_sys::systable_getnext(scan);
        let busy = !tuple.is_null() && being_changed(tuple);
        let found = !tuple.is_null();
        pg_sys::systable_endscan(scan);
        if !found {
            return Step::Done;
        }
        if busy {
            return Step::Busy;
        }
        let key = key();
        let mut old: pg_sys::HeapTuple = std::ptr::null_mut();
        let mut state: *mut std::ffi::c_void = std::ptr::null_mut();
        pg_sys::ffi::pg_guard_ffi_boundary(|| {
            (api.begin)(rel, pg_sys::InvalidOid, false, std::ptr::null_mut(), 1, &key, &mut old, &mut state)
        });
        if old.is_null() {
            return Step::Done;
        }
        // A row from before the column (ADD COLUMN rewrites no row) is shorter than its rewrite.
        let natts = u32::from((*(*old).t_data).t_infomask2) & pg_sys::HEAP_NATTS_MASK;
        if natts < u32::from(FLOOR_COLUMN.unsigned_abs()) {
            pg_sys::ffi::pg_guard_ffi_boundary(|| (api.cancel)(state));
            pg_sys::heap_freetuple(old);
            return Step::Old;
        }
        // Under the row's lock: another backend may have advanced it since the scan.
        let desc = (*rel).rd_att;
        let natts = usize::try_from((*desc).natts).unwrap_or(0);
        let mut values = vec![pg_sys::Datum::from(0); natts];
        let mut nulls = vec![true; natts];
        pg_sys::heap_deform_tuple(old, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
        let i = FLOOR_COLUMN as usize - 1;
        let current = if nulls[i] { i64::MIN } else { values[i].value() as i64 };
        if current >= until_pg_us && current != i64::MAX {
            pg_sys::ffi::pg_guard_ffi_boundary(|| (api.cancel)(state));
            pg_sys::heap_freetuple(old);
            return Step::Wrote;
        }
        let mut column = [i32::from(FLOOR_COLUMN)];
        let mut value = [pg_sys::Datum::from(until_pg_us)];
        let mut isnull = [false];
        let new = pg_sys::heap_modify_tuple_by_cols(
            old,
            desc,
            1,
            column.as_mut_ptr(),
            value.as_mut_ptr(),
            isnull.as_mut_ptr(),
        );
        // An in-place write keeps the row's length and header: a column a superuser added
        // since would change them, and PostgreSQL would raise an error.
        let same_shape = (*new).t_len == (*old).t_len && (*(*new).t_data).t_hoff == (*(*old).t_data).t_hoff;
        if same_shape {
            pg_sys::ffi::pg_guard_ffi_boundary(|| (api.finish)(state, new));
        } else {
            pg_sys::ffi::pg_guard_ffi_boundary(|| (api.cancel)(state));
        }
        pg_sys::heap_freetuple(new);
        pg_sys::heap_freetuple(old);
        if same_shape {
            Step::Wrote
        } else {
            Step::Old
        }
    }
}

/// Whether an open transaction other than this one is updating, deleting or locking the row.
///
/// # Safety
/// `tuple` is a tuple a scan just returned, its buffer pinned.
unsafe fn being_changed(tuple: pg_sys::HeapTuple) -> bool {
    // SAFETY: reading the header of a pinned tuple, as HeapTupleHeaderGetRawXmax does.
    unsafe {
        let header = (*tuple).t_data;
        let infomask = u32::from((*header).t_infomask);
        if infomask & pg_sys::HEAP_XMAX_INVALID != 0 {
            return false;
        }
        let xmax = (*header).t_choice.t_heap.t_xmax;
        if infomask & pg_sys::HEAP_XMAX_IS_MULTI != 0 {
            // Several lockers: busy while any of them runs (a lock-only one that ended is not).
            let lock_only = infomask & pg_sys::HEAP_XMAX_LOCK_ONLY != 0;
            return pg_sys::MultiXactIdIsRunning(xmax, lock_only);
        }
        xmax != pg_sys::InvalidTransactionId
            && !pg_sys::TransactionIdIsCurrentTransactionId(xmax)
            && pg_sys::TransactionIdIsInProgress(xmax)
    }
}
