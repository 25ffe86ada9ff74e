//! The production clock: `CLOCK_REALTIME` for time, an interruptible sleep for waits.

use pgrx::pg_sys;

use crate::core::monotonic::Clock;
use crate::core::time::{NS_PER_MS, NS_PER_SEC, NS_PER_US};

/// Reads the generators' clock: `clock_gettime(CLOCK_REALTIME)`, which on Linux runs in the
/// vDSO, with no system call, plus `snowflake_id.debug_clock_offset`. Called once per id, so it
/// goes straight to libc.
#[inline]
pub fn now_unix_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    // i64 nanoseconds last until 2262; the clock cannot read past that on a running server.
    // The fault-injection offset is 0 unless a test set it (snowflake_id.debug_clock_offset).
    ts.tv_sec.wrapping_mul(NS_PER_SEC).wrapping_add(ts.tv_nsec).wrapping_add(crate::guc::debug_clock_offset_ns())
}

pub fn now_unix_ms() -> i64 {
    now_unix_ns().div_euclid(NS_PER_MS)
}

/// The wall clock, as the generators see it.
pub struct WallClock;

/// Waits are slept in slices of at most this much, so that a query cancel or a shutdown request
/// is honoured within 10 ms even during a one-second wait for the clock.
const SLEEP_SLICE_NS: u64 = 10 * NS_PER_MS as u64;

impl Clock for WallClock {
    fn now_unix_ns(&mut self) -> i64 {
        now_unix_ns()
    }

    fn sleep_ns(&mut self, ns: u64) {
        let mut left = ns;
        while left > 0 {
            let slice = left.min(SLEEP_SLICE_NS);
            // SAFETY: pg_usleep is a plain timed sleep; no lock or shared state is held here
            // (the generators hold nothing across a wait).
            unsafe { pg_sys::pg_usleep(slice.div_ceil(NS_PER_US as u64) as std::ffi::c_long) };
            pgrx::check_for_interrupts!();
            left -= slice;
        }
    }
}
