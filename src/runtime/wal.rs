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
//! published only once they have flushed its record ([`sync_state`]), whatever
//! `synchronous_commit` the session sets: one session's renewal covers every session's ids, and
//! a promoted synchronous standby then continues above every id handed out. That is a wait per
//! renewal, never per id (`crate::runtime::reservation::renew`), and renewals reach further by the
//! standbys' lag, so that under a steady lag no call waits (`crate::core::reservation::Reach`).
//! While the standbys do not answer, ids keep coming from the reservation in force, then the calls
//! that need a renewal wait, as commits do, shown as `IPC`/`SyncRep` in `pg_stat_activity`, until
//! the standbys answer, `synchronous_standby_names` is emptied (the server's copy, which a reload
//! reaches while calls wait, as for commits), or the call is cancelled (57014, publishing nothing).
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
    use std::sync::atomic::{AtomicU32, Ordering};
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

    /// Whether a renewed reservation must reach synchronous standbys before it is published, and
    /// how far they have flushed the WAL.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct SyncState {
        /// `synchronous_standby_names` names standbys, as the server last read it for commits.
        pub required: bool,
        /// What the walsenders last released commits up to (`WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH]`),
        /// which only grows, and which they keep whether or not a commit waits.
        pub flushed: u64,
    }

    /// The synchronous standbys' state, read under `SyncRepLock` (shared) as a committing backend
    /// reads it in `SyncRepWaitForLSN`: whether some are required is the checkpointer's copy of
    /// the setting in shared memory (`WalSndCtl->sync_standbys_status`), which a reload reaches
    /// while calls wait, not this backend's, which it reads only between statements; and the
    /// server may have standbys at all (`max_wal_senders`). `synchronous_commit` plays no part:
    /// it is a session's, and a renewal covers every session's ids.
    pub fn sync_state() -> SyncState {
        read_sync_state(true)
    }

    /// [`sync_state`] without the lock, for a look that decides nothing by itself: a call that
    /// finds the renewal flushed (or no standby required) reads it again under the lock before it
    /// publishes anything. (One aligned 8-byte load is never torn on the 64-bit platforms this
    /// builds for; on others a torn value only sends the caller to the locked read.)
    pub fn sync_state_peek() -> SyncState {
        read_sync_state(false)
    }

    fn read_sync_state(locked: bool) -> SyncState {
        // SAFETY: plain reads of this process's settings; WalSndCtl points into shared memory for
        // the server's life (null only outside a server); SyncRepLock is the main array's
        // individual lock 32 in every major this builds for (lwlocknames.h), taken shared as
        // SyncRepWaitForLSN takes it, and never held across anything that can raise.
        unsafe {
            let ctl = pg_sys::WalSndCtl;
            if pg_sys::max_wal_senders == 0 || ctl.is_null() {
                return SyncState { required: false, flushed: 0 };
            }
            let lock = &raw mut (*pg_sys::MainLWLockArray.add(SYNC_REP_LOCK)).lock;
            if locked {
                pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED);
            }
            let lsn = &raw const (*ctl).lsn;
            let flushed = std::ptr::read_volatile(lsn.cast::<u64>().add(pg_sys::SYNC_REP_WAIT_FLUSH as usize));
            // The byte after `lsn`: `sync_standbys_status` since the 2025 minor releases, the bool
            // `sync_standbys_defined` before; read by place, so that a build against either
            // headers reads the same byte.
            let status = std::ptr::read_volatile(lsn.cast::<u8>().add(std::mem::size_of_val(&*lsn)));
            if locked {
                pg_sys::LWLockRelease(lock);
            }
            let required =
                standbys_defined(status, server_version_num()).unwrap_or_else(|| !pg_sys::SyncRepConfig.is_null());
            SyncState { required, flushed }
        }
    }

    /// Waits `ms` on the process latch, shown as PostgreSQL's own `IPC`/`SyncRep` wait event;
    /// interruptible (a cancel raises 57014 here).
    pub fn wait_as_sync_rep(ms: u64) {
        crate::runtime::clock::wait_on_latch_as(ms, pg_sys::WaitEventIPC::WAIT_EVENT_SYNC_REP);
    }

    /// The flags of `WalSndCtl->sync_standbys_status` (walsender_private.h), spelled out here so
    /// that a build against the headers of a minor release before them compiles and still reads
    /// a server of a later one.
    const SYNC_STANDBY_INIT: u8 = 1 << 0;
    const SYNC_STANDBY_DEFINED: u8 = 1 << 1;

    /// `SyncRepLock`'s place in `MainLWLockArray`.
    const SYNC_REP_LOCK: usize = 32;

    /// What the byte after `WalSndCtl->lsn` says: whether the checkpointer's copy of
    /// `synchronous_standby_names` names standbys, or `None` before the checkpointer first read
    /// the setting after a start, when the backend's own copy decides (as in `SyncRepWaitForLSN`).
    /// The minor releases of May 2025 (15.13, 16.9, 17.5; 18 from the start) made it a set of
    /// flags, `SYNC_STANDBY_INIT | SYNC_STANDBY_DEFINED`; before, it was one bool.
    pub(super) fn standbys_defined(byte: u8, server_version_num: u32) -> Option<bool> {
        let flags = match server_version_num / 10_000 {
            15 => server_version_num >= 150_013,
            16 => server_version_num >= 160_009,
            17 => server_version_num >= 170_005,
            _ => true,
        };
        if !flags {
            Some(byte != 0)
        } else if byte & SYNC_STANDBY_INIT == 0 {
            None
        } else {
            Some(byte & SYNC_STANDBY_DEFINED != 0)
        }
    }

    /// The running server's `server_version_num` (the library may be built against another
    /// minor release's headers), read once per process.
    fn server_version_num() -> u32 {
        static VERSION: AtomicU32 = AtomicU32::new(0);
        let known = VERSION.load(Ordering::Relaxed);
        if known != 0 {
            return known;
        }
        // SAFETY: a read of a built-in, always present setting; the string is PostgreSQL's.
        let v = unsafe {
            let s = pg_sys::GetConfigOption(c"server_version_num".as_ptr(), true, false);
            if s.is_null() {
                0
            } else {
                std::ffi::CStr::from_ptr(s).to_str().ok().and_then(|t| t.parse().ok()).unwrap_or(0)
            }
        };
        VERSION.store(v, Ordering::Relaxed);
        v
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

        #[test]
        fn the_shared_flag_is_read_as_its_minor_release_wrote_it() {
            // Before the May 2025 minor releases: a bool.
            assert_eq!(standbys_defined(1, 150_012), Some(true));
            assert_eq!(standbys_defined(0, 160_008), Some(false));
            // Since: flags, and nothing known before the checkpointer's first read.
            for v in [150_013, 160_009, 170_005, 170_011, 180_000, 180_006] {
                assert_eq!(standbys_defined(0, v), None, "{v}");
                assert_eq!(standbys_defined(1, v), Some(false), "{v}");
                assert_eq!(standbys_defined(3, v), Some(true), "{v}");
            }
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
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct SyncState {
        pub required: bool,
        pub flushed: u64,
    }
    pub fn sync_state() -> SyncState {
        SyncState { required: false, flushed: 0 }
    }
    pub fn sync_state_peek() -> SyncState {
        sync_state()
    }
    pub fn wait_as_sync_rep(_ms: u64) {}
}

pub use imp::{init, log_reservation, sync_state, sync_state_peek, wait_as_sync_rep};
