//! Failover: the reservation travels in the WAL to every physical standby (PostgreSQL 15+).
//!
//! Every renewal of the reservation (about four a second under load, never per id) is written
//! to the WAL as one 16-byte record of a custom resource manager, after the file and before the
//! new reservation is published in shared memory. A standby (or a crash recovery, or a backup
//! being restored) replays it into its own reservation file and generators. So a standby that
//! is promoted, by an operator or by any HA tool, starts every generator above every id the old
//! primary issued under a reservation that reached it, whatever its own clock says.
//!
//! Why that covers every stored id: an id is issued only once its reservation is published,
//! which is after its record was inserted into the WAL. A row carrying the id is written to the
//! WAL later still. A standby that has replayed the row has replayed the reservation first.
//! The record is also flushed at once, so that ids handed out without being stored (returned
//! to a client) are covered as soon as the standby receives the WAL.
//!
//! **Synchronous standbys.** A commit waits for them; an id does not commit (an autocommit
//! `SELECT snowflake_next()` has no transaction id, and an id leaves with the result, before any
//! commit). So where `synchronous_standby_names` names standbys, a renewed reservation is
//! published only once they have flushed its record ([`standbys_flushed`]), whatever
//! `synchronous_commit` the session sets: one session's renewal covers every session's ids, and
//! a promoted synchronous standby then continues above every id handed out. That is a wait per
//! renewal, never per id (`crate::runtime::reservation::renew`). While the standbys do not
//! answer, ids keep coming from the reservation in force (half a second ahead of the clock), then
//! the calls that need a renewal wait, as commits do, shown as `IPC`/`SyncRep` in
//! `pg_stat_activity`, until the standbys answer, `synchronous_standby_names` is emptied (read
//! at the next statement), or the call is cancelled (57014, publishing nothing).
//!
//! **The record is versioned by its kind** (the high bits of `info`): `XLOG_RESERVATION` (0x10)
//! is the 16-byte record every release since 0.2.0 writes. A later format gets a new kind, and
//! redo stops recovery with FATAL on any kind or length it does not know, as core resource
//! managers stop on an unknown op code: a standby older than its primary never skips a
//! reservation and keeps a stale one. A replayed reservation that cannot be written to the file
//! stops recovery too, so that no restartpoint passes a reservation that no durable place holds;
//! started again, the server replays from its last restartpoint, before that record.
//!
//! The resource manager id is [`RMGR_ID`]. It is not on PostgreSQL's list of registered custom
//! resource managers (the wiki's CustomWALResourceManagers page); another extension that takes
//! 161 makes the server refuse to start with both loaded ("failed to register custom resource
//! manager"). Every server that replays this WAL, standbys and restored backups included, must
//! have `snowflake_id` in `shared_preload_libraries`; recovery stops with "resource manager with
//! ID 161 not registered" otherwise (add the library and start again: nothing is lost).
//! PostgreSQL 14 has no custom resource managers: there, a promoted standby starts from its own
//! clock and reservation file (see the README).

/// What replaying a reservation record does: `crate::runtime::reservation::replay`, given to
/// `init`. A function passed in rather than called by name, because the reservation writes its
/// records through this module, which therefore sits below it.
pub type Replay = fn(until_unix_ms: i64, written_at_unix_ms: i64);

#[cfg(not(feature = "pg14"))]
mod imp {
    use std::sync::OnceLock;

    use pgrx::pg_sys;
    use pgrx::prelude::*;

    use super::Replay;
    use crate::core::time;

    /// Custom resource manager ids are 128–255; 128 is for experiments.
    pub const RMGR_ID: u8 = 161;
    /// The one record kind: a renewed reservation. The low four bits of `info` are PostgreSQL's.
    const XLOG_RESERVATION: u8 = 0x10;
    const RECORD_LEN: usize = 16;

    /// Set once, by `init`, before the resource manager is registered: every process that replays
    /// (the startup process, forked from the postmaster) inherits it.
    static REPLAY: OnceLock<Replay> = OnceLock::new();

    /// Registers the resource manager, whose redo calls `replay`. Call from `_PG_init` while
    /// `shared_preload_libraries` is processed, which PostgreSQL requires.
    pub fn init(replay: Replay) {
        let _ = REPLAY.set(replay);
        let rmgr = pg_sys::RmgrData {
            rm_name: c"snowflake_id".as_ptr(),
            rm_redo: Some(redo),
            rm_desc: Some(desc),
            rm_identify: Some(identify),
            ..Default::default()
        };
        // SAFETY: PostgreSQL copies the struct into its table; the name is a static string.
        #[allow(clippy::unnecessary_mut_passed)]
        unsafe {
            pg_sys::RegisterCustomRmgr(RMGR_ID, (&raw const rmgr).cast_mut());
        }
    }

    fn encode(until_unix_ms: i64, written_at_unix_ms: i64) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[..8].copy_from_slice(&until_unix_ms.to_le_bytes());
        b[8..].copy_from_slice(&written_at_unix_ms.to_le_bytes());
        b
    }

    /// The record's (reserved until, written at), or its kind and length when this version does
    /// not know that kind of record or its length does not match.
    ///
    /// # Safety
    /// `record` is the reader state PostgreSQL passes to a resource manager's callbacks.
    unsafe fn decode(record: *mut pg_sys::XLogReaderState) -> Result<(i64, i64), (u8, usize)> {
        // SAFETY: the decoded record and its main data live as long as the callback.
        unsafe {
            let r = (*record).record;
            if r.is_null() {
                return Err((0, 0));
            }
            let kind = (*r).header.xl_info & !(pg_sys::XLR_INFO_MASK as u8);
            let len = (*r).main_data_len as usize;
            if kind != XLOG_RESERVATION || len != RECORD_LEN || (*r).main_data.is_null() {
                return Err((kind, len));
            }
            let data = std::slice::from_raw_parts((*r).main_data.cast::<u8>(), RECORD_LEN);
            let mut until = [0u8; 8];
            let mut at = [0u8; 8];
            until.copy_from_slice(&data[..8]);
            at.copy_from_slice(&data[8..]);
            Ok((i64::from_le_bytes(until), i64::from_le_bytes(at)))
        }
    }

    /// Writes a renewed reservation to the WAL and flushes it; returns the end of its record. The
    /// caller holds the reservation lock and has put the reservation on disk; it publishes it
    /// afterwards (once the synchronous standbys have the record, where there are some).
    pub fn log_reservation(until_unix_ms: i64, written_at_unix_ms: i64) -> u64 {
        let data = encode(until_unix_ms, written_at_unix_ms);
        // SAFETY: the standard insertion sequence; the data outlives XLogInsert, which copies it.
        unsafe {
            pg_sys::XLogBeginInsert();
            #[cfg(feature = "pg18")]
            pg_sys::XLogRegisterData(data.as_ptr().cast(), RECORD_LEN as u32);
            #[cfg(not(feature = "pg18"))]
            pg_sys::XLogRegisterData(data.as_ptr().cast_mut().cast(), RECORD_LEN as _);
            let lsn = pg_sys::XLogInsert(RMGR_ID, XLOG_RESERVATION);
            // Skipped by the sabotage-no-sync build of `make chaos`, which a power loss exposes.
            if !cfg!(feature = "sabotage-no-sync") {
                pg_sys::XLogFlush(lsn);
            }
            lsn
        }
    }

    /// Whether a renewed reservation must reach synchronous standbys before it is published:
    /// `synchronous_standby_names` names some, as this backend last read the setting (a reload
    /// reaches a backend between statements), and the server may have standbys at all
    /// (`max_wal_senders`), as PostgreSQL decides for a commit. `synchronous_commit` plays no
    /// part: it is a session's, and a renewal covers every session's ids.
    pub fn standbys_required() -> bool {
        // SAFETY: plain reads of settings this process owns; SyncRepConfig is the parsed
        // synchronous_standby_names, null when it is empty.
        unsafe { pg_sys::max_wal_senders > 0 && !pg_sys::SyncRepConfig.is_null() }
    }

    /// How far the synchronous standbys have flushed the WAL: what the walsenders last released
    /// commits up to (`WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH]`), which only grows, and which they
    /// keep whether or not a commit waits. Read without `SyncRepLock` as one aligned 8-byte
    /// load, which is never torn; a stale value only makes a caller wait a little longer.
    pub fn standbys_flushed() -> u64 {
        // SAFETY: WalSndCtl points into shared memory for the server's life (null only outside
        // a server); `lsn` precedes every field whose layout a minor release changed.
        unsafe {
            let ctl = pg_sys::WalSndCtl;
            if ctl.is_null() {
                return 0;
            }
            std::ptr::read_volatile(&raw const (*ctl).lsn[pg_sys::SYNC_REP_WAIT_FLUSH as usize])
        }
    }

    /// Waits until the synchronous standbys have flushed the WAL up to `lsn`, or none is required
    /// any more; interruptible as any wait of a query (a cancel raises 57014 here). The caller
    /// holds no lock. The walsenders wake only the commits they queued, so this looks every
    /// millisecond, on the process latch, shown as PostgreSQL's own `SyncRep` wait event.
    pub fn wait_for_standbys(lsn: u64) {
        while standbys_required() && standbys_flushed() < lsn {
            crate::runtime::clock::wait_on_latch_as(1, pg_sys::WaitEventIPC::WAIT_EVENT_SYNC_REP);
        }
    }

    #[pg_guard]
    unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
        // SAFETY: called by the startup process with a decoded record of this manager.
        match unsafe { decode(record) } {
            Ok((until, at)) => match REPLAY.get() {
                Some(replay) => replay(until, at),
                None => unreachable!("init sets the replay before it registers the resource manager"),
            },
            Err((kind, len)) => crate::runtime::errors::unknown_wal_record(kind, len).report(pgrx::PgLogLevel::FATAL),
        }
    }

    #[pg_guard]
    unsafe extern "C-unwind" fn desc(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
        // SAFETY: as in `redo`; the text is copied into `buf`.
        let text = match unsafe { decode(record) } {
            Ok((until, at)) => {
                format!("reserved until {} (written at {})", time::format_unix_ms(until), time::format_unix_ms(at))
            }
            Err((kind, len)) => format!("unknown kind 0x{kind:02x}, {len} bytes"),
        };
        if let Ok(c) = std::ffi::CString::new(text) {
            unsafe { pg_sys::appendStringInfoString(buf, c.as_ptr()) };
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn only_the_known_kind_and_length_decode() {
            let mut data = encode(5, 7);
            // SAFETY: plain C structs, zeroed as PostgreSQL's allocator leaves them.
            let mut rec: pg_sys::DecodedXLogRecord = unsafe { std::mem::zeroed() };
            let mut state: pg_sys::XLogReaderState = unsafe { std::mem::zeroed() };
            rec.header.xl_info = XLOG_RESERVATION | 0x01; // PostgreSQL's own low bits are ignored
            rec.main_data = data.as_mut_ptr().cast();
            rec.main_data_len = RECORD_LEN as u32;
            state.record = &raw mut rec;
            let decoded = |state: &mut pg_sys::XLogReaderState| unsafe { decode(state) };
            assert_eq!(decoded(&mut state), Ok((5, 7)));
            // SAFETY: state.record points to rec, alive for the test.
            unsafe { (*state.record).header.xl_info = 0x20 };
            assert_eq!(decoded(&mut state), Err((0x20, RECORD_LEN)), "a later kind is refused, never skipped");
            unsafe {
                (*state.record).header.xl_info = XLOG_RESERVATION;
                (*state.record).main_data_len = 24;
            }
            assert_eq!(decoded(&mut state), Err((XLOG_RESERVATION, 24)), "another length is refused");
        }
    }

    #[pg_guard]
    unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
        if info & !(pg_sys::XLR_INFO_MASK as u8) == XLOG_RESERVATION {
            c"RESERVATION".as_ptr()
        } else {
            std::ptr::null()
        }
    }
}

/// PostgreSQL 14: no record, so nothing for a standby to flush, and nothing to wait for (a
/// promoted standby starts from its own clock and file; `snowflake_id_advance` covers the rest).
#[cfg(feature = "pg14")]
mod imp {
    pub fn init(_replay: super::Replay) {}
    pub fn log_reservation(_until_unix_ms: i64, _written_at_unix_ms: i64) -> u64 {
        0
    }
    pub fn standbys_required() -> bool {
        false
    }
    pub fn standbys_flushed() -> u64 {
        0
    }
    pub fn wait_for_standbys(_lsn: u64) {}
}

pub use imp::{init, log_reservation, standbys_flushed, standbys_required, wait_for_standbys};
