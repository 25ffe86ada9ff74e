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

    /// Writes a renewed reservation to the WAL and flushes it. The caller holds the reservation
    /// lock and has put the reservation on disk; it publishes it afterwards.
    pub fn log_reservation(until_unix_ms: i64, written_at_unix_ms: i64) {
        let data = encode(until_unix_ms, written_at_unix_ms);
        // SAFETY: the standard insertion sequence; the data outlives XLogInsert, which copies it.
        unsafe {
            pg_sys::XLogBeginInsert();
            #[cfg(feature = "pg18")]
            pg_sys::XLogRegisterData(data.as_ptr().cast(), RECORD_LEN as u32);
            #[cfg(not(feature = "pg18"))]
            pg_sys::XLogRegisterData(data.as_ptr().cast_mut().cast(), RECORD_LEN as _);
            let lsn = pg_sys::XLogInsert(RMGR_ID, XLOG_RESERVATION);
            pg_sys::XLogFlush(lsn);
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

#[cfg(feature = "pg14")]
mod imp {
    pub fn init(_replay: super::Replay) {}
    pub fn log_reservation(_until_unix_ms: i64, _written_at_unix_ms: i64) {}
}

pub use imp::{init, log_reservation};
