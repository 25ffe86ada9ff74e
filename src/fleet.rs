//! The fleet check's glue: this server's facts, and asking the peers for theirs over libpq. The
//! rules are `crate::core::fleet`.
//!
//! **Connecting from a backend.** A backend is single-threaded, and its error handling, signals
//! and memory contexts assume it: no threads and no async runtime here. As `dblink` and
//! `postgres_fdw` do, each peer is reached with libpq in non-blocking mode (`PQconnectStartParams`
//! and `PQconnectPoll`, then `PQsendQuery` and `PQconsumeInput`), waiting on the socket with
//! `WaitLatchOrSocket`, so that a query cancel, `statement_timeout`, a termination or the death of
//! the postmaster end the wait at once, and every step is bounded by the call's timeout. The
//! connection is closed when its guard is dropped, which an ERROR unwinding through the Rust
//! frames also does.
//!
//! **Why libpq is loaded with `dlopen`**, not linked: only this function needs it, and a server
//! without `libpq.so.5` (the client library every PostgreSQL package depends on, and that the
//! server's own `libpqwalreceiver` loads) should still load the extension; the check then says
//! what is missing. No contrib module is needed: `dblink` would have to be installed in every
//! database that runs the check, and could not wait on the latch for us.
//!
//! **What a peer is asked:** its clock, five times (`clock_timestamp()`, core SQL), and then
//! `snowflake_fleet_info()` in the schema where its snowflake_id lives. Nothing else runs there.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pgrx::pg_sys;

use crate::core::fleet::{Reached, Sample, ServerInfo};
use crate::core::shards::ShardSet;
use crate::{clock, guc, shmem};

/// This server's facts, for `snowflake_fleet_info()` and as the check's first server.
pub fn local_info() -> ServerInfo {
    let layout = guc::layout();
    let tl = layout.timeline();
    let minted: Vec<(u32, u32)> = shmem::shard_slots()
        .map(|slots| slots.filter(|(_, slot)| slot.issued(&tl) > 0).map(|(s, _)| (s, s)).collect())
        .unwrap_or_default();
    let minted = merge(minted);
    // SAFETY: plain reads of the control file's identifier and the recovery state.
    let (sysid, in_recovery) = unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::RecoveryInProgress()) };
    ServerInfo {
        system_identifier: sysid.to_string(),
        timeline: timeline(in_recovery),
        in_recovery,
        layout: layout.widths().to_string(),
        epoch_unix_ms: layout.epoch_unix_ms(),
        shards: guc::shards_text(),
        minted: if minted.is_empty() { String::new() } else { ShardSet::Ranges(minted).to_string() },
        reserved_until_unix_ms: shmem::reserved_until(),
        clock_unix_us: clock::real_unix_us(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// Adjacent single shards as ranges.
fn merge(single: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (lo, hi) in single {
        match out.last_mut() {
            Some(last) if lo == last.1 + 1 => last.1 = hi,
            _ => out.push((lo, hi)),
        }
    }
    out
}

fn timeline(in_recovery: bool) -> u32 {
    let mut tli: pg_sys::TimeLineID = 0;
    // SAFETY: in recovery, the replay position's timeline; otherwise the one WAL is written on.
    unsafe {
        if in_recovery {
            pg_sys::GetXLogReplayRecPtr(&mut tli);
        } else {
            #[cfg(feature = "pg14")]
            {
                tli = pg_sys::ThisTimeLineID;
            }
            #[cfg(not(feature = "pg14"))]
            {
                tli = pg_sys::GetWALInsertionTimeLine();
            }
        }
    }
    tli
}

// --- libpq, loaded on first use -------------------------------------------------------------

#[repr(C)]
struct PGconn(c_void);
#[repr(C)]
struct PGresult(c_void);
#[repr(C)]
struct ConninfoOption {
    keyword: *mut c_char,
    envvar: *mut c_char,
    compiled: *mut c_char,
    val: *mut c_char,
    label: *mut c_char,
    dispchar: *mut c_char,
    dispsize: c_int,
}

const CONNECTION_BAD: c_int = 1;
const PGRES_POLLING_FAILED: c_int = 0;
const PGRES_POLLING_READING: c_int = 1;
const PGRES_POLLING_WRITING: c_int = 2;
const PGRES_POLLING_OK: c_int = 3;
const PGRES_TUPLES_OK: c_int = 2;

/// The libpq functions the check calls.
struct Libpq {
    connect_start_params: unsafe extern "C" fn(*const *const c_char, *const *const c_char, c_int) -> *mut PGconn,
    connect_poll: unsafe extern "C" fn(*mut PGconn) -> c_int,
    status: unsafe extern "C" fn(*const PGconn) -> c_int,
    error_message: unsafe extern "C" fn(*const PGconn) -> *const c_char,
    socket: unsafe extern "C" fn(*const PGconn) -> c_int,
    set_nonblocking: unsafe extern "C" fn(*mut PGconn, c_int) -> c_int,
    send_query: unsafe extern "C" fn(*mut PGconn, *const c_char) -> c_int,
    flush: unsafe extern "C" fn(*mut PGconn) -> c_int,
    consume_input: unsafe extern "C" fn(*mut PGconn) -> c_int,
    is_busy: unsafe extern "C" fn(*mut PGconn) -> c_int,
    get_result: unsafe extern "C" fn(*mut PGconn) -> *mut PGresult,
    result_status: unsafe extern "C" fn(*const PGresult) -> c_int,
    result_error_message: unsafe extern "C" fn(*const PGresult) -> *const c_char,
    ntuples: unsafe extern "C" fn(*const PGresult) -> c_int,
    getvalue: unsafe extern "C" fn(*const PGresult, c_int, c_int) -> *const c_char,
    getisnull: unsafe extern "C" fn(*const PGresult, c_int, c_int) -> c_int,
    clear: unsafe extern "C" fn(*mut PGresult),
    finish: unsafe extern "C" fn(*mut PGconn),
    conninfo_parse: unsafe extern "C" fn(*const c_char, *mut *mut c_char) -> *mut ConninfoOption,
    conninfo_free: unsafe extern "C" fn(*mut ConninfoOption),
    freemem: unsafe extern "C" fn(*mut c_void),
}

// SAFETY: function pointers into a library that stays loaded; a backend has one thread.
unsafe impl Send for Libpq {}
unsafe impl Sync for Libpq {}

static LIBPQ: OnceLock<Result<Libpq, String>> = OnceLock::new();

fn libpq() -> Result<&'static Libpq, String> {
    LIBPQ.get_or_init(load_libpq).as_ref().map_err(Clone::clone)
}

// Each transmute's target is the `Libpq` field it initialises, whose type is libpq's signature.
#[allow(clippy::missing_transmute_annotations)]
fn load_libpq() -> Result<Libpq, String> {
    // The system's, else the one beside the server's own libraries (a relocatable install).
    // SAFETY: pkglib_path is set at start, a NUL-terminated path.
    let pkglib = unsafe { CStr::from_ptr(std::ptr::addr_of!(pg_sys::pkglib_path).cast::<c_char>()) }
        .to_string_lossy()
        .into_owned();
    let candidates = ["libpq.so.5".to_owned(), format!("{pkglib}/libpq.so.5"), format!("{pkglib}/../libpq.so.5")];
    let mut handle = std::ptr::null_mut();
    for c in &candidates {
        let name = CString::new(c.as_str()).map_err(|e| e.to_string())?;
        // SAFETY: dlopen with a valid path; a failure returns NULL.
        handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if !handle.is_null() {
            break;
        }
    }
    if handle.is_null() {
        return Err(format!("libpq.so.5 was not found (tried {})", candidates.join(", ")));
    }
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: dlsym on a loaded handle; the symbol's type is libpq's documented one.
            let p = unsafe { libc::dlsym(handle, concat!($name, "\0").as_ptr().cast()) };
            if p.is_null() {
                return Err(format!("libpq has no {}", $name));
            }
            // SAFETY: a non-null function pointer of the declared signature.
            unsafe { std::mem::transmute::<*mut c_void, _>(p) }
        }};
    }
    Ok(Libpq {
        connect_start_params: sym!("PQconnectStartParams"),
        connect_poll: sym!("PQconnectPoll"),
        status: sym!("PQstatus"),
        error_message: sym!("PQerrorMessage"),
        socket: sym!("PQsocket"),
        set_nonblocking: sym!("PQsetnonblocking"),
        send_query: sym!("PQsendQuery"),
        flush: sym!("PQflush"),
        consume_input: sym!("PQconsumeInput"),
        is_busy: sym!("PQisBusy"),
        get_result: sym!("PQgetResult"),
        result_status: sym!("PQresultStatus"),
        result_error_message: sym!("PQresultErrorMessage"),
        ntuples: sym!("PQntuples"),
        getvalue: sym!("PQgetvalue"),
        getisnull: sym!("PQgetisnull"),
        clear: sym!("PQclear"),
        finish: sym!("PQfinish"),
        conninfo_parse: sym!("PQconninfoParse"),
        conninfo_free: sym!("PQconninfoFree"),
        freemem: sym!("PQfreemem"),
    })
}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: libpq returns NUL-terminated strings it owns; we copy at once.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().trim_end().to_owned()
}

/// A connection, finished when dropped (on every path, an ERROR's unwinding included).
struct Conn<'a> {
    pq: &'a Libpq,
    conn: *mut PGconn,
    deadline: Instant,
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        // SAFETY: a connection from PQconnectStartParams, finished once.
        unsafe { (self.pq.finish)(self.conn) };
    }
}

/// Waits until the socket is ready as asked, the latch is set (then interrupts are checked), or
/// the deadline passes.
fn wait_socket(c: &Conn<'_>, writable: bool) -> Result<(), String> {
    loop {
        let left = c.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("timed out".into());
        }
        // SAFETY: a socket libpq reports open; MyLatch is this backend's latch.
        let sock = unsafe { (c.pq.socket)(c.conn) };
        if sock < 0 {
            return Err("the connection has no socket".into());
        }
        let events = pg_sys::WL_LATCH_SET
            | pg_sys::WL_TIMEOUT
            | pg_sys::WL_EXIT_ON_PM_DEATH
            | if writable { pg_sys::WL_SOCKET_WRITEABLE } else { pg_sys::WL_SOCKET_READABLE };
        let ms = left.as_millis().clamp(1, i64::MAX as u128) as std::ffi::c_long;
        // SAFETY: a plain wait on this backend's latch and the connection's socket.
        let got =
            unsafe { pg_sys::WaitLatchOrSocket(pg_sys::MyLatch, events as c_int, sock, ms, pg_sys::PG_WAIT_EXTENSION) };
        if got as u32 & pg_sys::WL_LATCH_SET != 0 {
            // SAFETY: resetting our own latch before looking at why it was set.
            unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
            pgrx::check_for_interrupts!();
        }
        if got as u32 & (pg_sys::WL_SOCKET_READABLE | pg_sys::WL_SOCKET_WRITEABLE) != 0 {
            return Ok(());
        }
    }
}

/// Connects to `conninfo` in non-blocking mode within the deadline.
fn connect<'a>(pq: &'a Libpq, conninfo: &str, deadline: Instant) -> Result<Conn<'a>, String> {
    let dsn = CString::new(conninfo).map_err(|_| "the connection string holds a NUL byte".to_owned())?;
    let keys = [c"dbname".as_ptr(), c"application_name".as_ptr(), std::ptr::null()];
    let values = [dsn.as_ptr(), c"snowflake_id fleet check".as_ptr(), std::ptr::null()];
    // SAFETY: NULL-terminated keyword and value arrays; expand_dbname = 1 reads dbname as a
    // connection string, as dblink does.
    let conn = unsafe { (pq.connect_start_params)(keys.as_ptr(), values.as_ptr(), 1) };
    if conn.is_null() {
        return Err("libpq could not allocate a connection".into());
    }
    let c = Conn { pq, conn, deadline };
    // SAFETY: a connection just started.
    if unsafe { (pq.status)(c.conn) } == CONNECTION_BAD {
        return Err(text(unsafe { (pq.error_message)(c.conn) }));
    }
    let mut poll = PGRES_POLLING_WRITING;
    loop {
        match poll {
            PGRES_POLLING_OK => break,
            PGRES_POLLING_FAILED => return Err(text(unsafe { (pq.error_message)(c.conn) })),
            PGRES_POLLING_READING => wait_socket(&c, false)?,
            _ => wait_socket(&c, true)?,
        }
        // SAFETY: polling the connection being made.
        poll = unsafe { (pq.connect_poll)(c.conn) };
    }
    // SAFETY: a connected connection.
    if unsafe { (pq.set_nonblocking)(c.conn, 1) } != 0 {
        return Err(text(unsafe { (pq.error_message)(c.conn) }));
    }
    Ok(c)
}

/// Runs one query and returns its first row's first column (`None` for no row or NULL).
fn query(c: &Conn<'_>, sql: &CStr) -> Result<Option<String>, String> {
    let pq = c.pq;
    // SAFETY: a connected, non-blocking connection with no query in progress.
    if unsafe { (pq.send_query)(c.conn, sql.as_ptr()) } == 0 {
        return Err(text(unsafe { (pq.error_message)(c.conn) }));
    }
    // Flush what could not be sent at once.
    loop {
        // SAFETY: as above.
        match unsafe { (pq.flush)(c.conn) } {
            0 => break,
            1 => wait_socket(c, true)?,
            _ => return Err(text(unsafe { (pq.error_message)(c.conn) })),
        }
    }
    let mut value = None;
    let mut failure = None;
    loop {
        // SAFETY: reading what the peer sent; PQisBusy says whether a result is complete.
        while unsafe { (pq.is_busy)(c.conn) } != 0 {
            wait_socket(c, false)?;
            if unsafe { (pq.consume_input)(c.conn) } == 0 {
                return Err(text(unsafe { (pq.error_message)(c.conn) }));
            }
        }
        // SAFETY: a complete result, or NULL when the query is done.
        let res = unsafe { (pq.get_result)(c.conn) };
        if res.is_null() {
            break;
        }
        // SAFETY: reading then clearing a result we own.
        unsafe {
            if (pq.result_status)(res) == PGRES_TUPLES_OK {
                if (pq.ntuples)(res) > 0 && (pq.getisnull)(res, 0, 0) == 0 {
                    value = Some(text((pq.getvalue)(res, 0, 0)));
                }
            } else {
                failure = Some(text((pq.result_error_message)(res)));
            }
            (pq.clear)(res);
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(value),
    }
}

/// A peer's label: its connection string without the password.
pub fn label(conninfo: &str) -> String {
    let Ok(pq) = libpq() else { return conninfo.chars().take(200).collect() };
    let Ok(dsn) = CString::new(conninfo) else { return "(a connection string with a NUL byte)".into() };
    let mut err = std::ptr::null_mut();
    // SAFETY: PQconninfoParse returns an array ending in a NULL keyword, or NULL with an error
    // message we free.
    let opts = unsafe { (pq.conninfo_parse)(dsn.as_ptr(), &mut err) };
    if opts.is_null() {
        if !err.is_null() {
            unsafe { (pq.freemem)(err.cast()) };
        }
        return "(a connection string libpq cannot parse)".into();
    }
    let mut parts = Vec::new();
    let mut p = opts;
    // SAFETY: walking the array up to its terminator, copying what we keep.
    unsafe {
        while !(*p).keyword.is_null() {
            let key = text((*p).keyword);
            if !(*p).val.is_null() && key != "password" {
                parts.push(format!("{key}={}", text((*p).val)));
            }
            p = p.add(1);
        }
        (pq.conninfo_free)(opts);
    }
    parts.join(" ")
}

/// Asks one peer: its clock five times, then its facts. Never raises for the peer's sake (only a
/// cancel or a termination of this backend does).
pub fn ask(conninfo: &str, timeout: Duration) -> Reached {
    let pq = match libpq() {
        Ok(pq) => pq,
        Err(e) => return Reached::No(e),
    };
    let deadline = Instant::now() + timeout;
    let c = match connect(pq, conninfo, deadline) {
        Ok(c) => c,
        Err(e) => return Reached::No(e),
    };
    let mut samples = Vec::with_capacity(5);
    for _ in 0..5 {
        let sent_us = clock::real_unix_us();
        let peer = query(&c, c"SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8");
        let received_us = clock::real_unix_us();
        match peer.map(|v| v.and_then(|v| v.parse::<i64>().ok())) {
            Ok(Some(peer_us)) => samples.push(Sample { sent_us, peer_us, received_us }),
            Ok(None) => return Reached::No("it returned no clock reading".into()),
            Err(e) => return Reached::No(e),
        }
    }
    let schema = match query(
        &c,
        c"SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'snowflake_id'",
    ) {
        Ok(Some(s)) => s,
        Ok(None) => return Reached::NoExtension("snowflake_id is not installed in that database".into()),
        Err(e) => return Reached::No(e),
    };
    let Ok(sql) = CString::new(format!("SELECT {schema}.snowflake_fleet_info()::text")) else {
        return Reached::NoExtension("its schema name holds a NUL byte".into());
    };
    let info = match query(&c, &sql) {
        Ok(Some(j)) => j,
        Ok(None) => return Reached::NoExtension("snowflake_fleet_info() returned nothing".into()),
        Err(e) => return Reached::NoExtension(format!("snowflake_fleet_info() failed there: {e}")),
    };
    match serde_json::from_str::<ServerInfo>(&info) {
        Ok(info) => Reached::Yes(info, crate::core::fleet::clock_offset(&samples)),
        Err(e) => Reached::NoExtension(format!("its snowflake_fleet_info() is not one this version reads ({e})")),
    }
}
