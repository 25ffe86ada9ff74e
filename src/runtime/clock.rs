//! The generators' clock: `CLOCK_REALTIME`, read through the CPU's cycle counter when that is
//! safe (`crate::core::cycle_clock`) and `snowflake_id.clock_source` allows, shifted by
//! `snowflake_id.debug_clock_offset`; and an interruptible sleep for waits. The operating
//! system's own clocks, unshifted, are `crate::runtime::sysclock`.

use std::cell::UnsafeCell;

use pgrx::pg_sys;

use crate::core::cycle_clock::{CycleSource, Extrapolator};
use crate::core::monotonic::Clock;
use crate::core::time::{NS_PER_MS, NS_PER_US};
use crate::runtime::{guc, sysclock};

/// Reads the generators' clock, plus `snowflake_id.debug_clock_offset`. Called once per id: with
/// `snowflake_id.clock_source = auto` on a server whose kernel keeps time with the TSC, it is
/// extrapolated from the TSC and re-anchored to `CLOCK_REALTIME` at least every 12 µs;
/// otherwise it is `clock_gettime(CLOCK_REALTIME)` (in the vDSO on Linux: no system call).
#[inline]
pub fn now_unix_ns() -> i64 {
    let now = if sysclock::tsc_available() && guc::use_cycle_counter() {
        // SAFETY: see ProcessLocal: one thread, and Extrapolator::now calls nothing that re-enters.
        unsafe { (*EXTRAPOLATOR.0.get()).now(&mut Tsc) }
    } else {
        sysclock::real_unix_ns()
    };
    // The fault-injection offset is 0 unless a test set it (snowflake_id.debug_clock_offset).
    now.wrapping_add(guc::debug_clock_offset_ns())
}

pub fn now_unix_ms() -> i64 {
    now_unix_ns().div_euclid(NS_PER_MS)
}

/// A value only this process uses. PostgreSQL runs a backend as a single thread; the value is
/// touched only from [`now_unix_ns`], which no signal handler calls and which does not call
/// itself, so there is never more than one reference to it.
/// (Plain `cargo test` never calls it: the glue only runs inside PostgreSQL.)
struct ProcessLocal<T>(UnsafeCell<T>);
// SAFETY: see above: never shared between threads. Only for the extrapolator, a plain Copy value.
unsafe impl Sync for ProcessLocal<Extrapolator> {}

static EXTRAPOLATOR: ProcessLocal<Extrapolator> = ProcessLocal(UnsafeCell::new(Extrapolator::new()));

/// The TSC, with `CLOCK_REALTIME` as the real clock.
struct Tsc;

impl CycleSource for Tsc {
    #[inline]
    fn cycles(&mut self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: RDTSC exists on every x86-64 CPU; sysclock::init() enables this path only on
        // x86-64.
        return unsafe { core::arch::x86_64::_rdtsc() };
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("the cycle counter is only used on x86-64")
    }

    fn real_unix_ns(&mut self) -> i64 {
        sysclock::real_unix_ns()
    }
}

/// The wall clock, as the generators see it.
pub struct WallClock;

impl Clock for WallClock {
    fn now_unix_ns(&mut self) -> i64 {
        now_unix_ns()
    }

    fn monotonic_ns(&mut self) -> u64 {
        sysclock::monotonic_ns()
    }

    /// Whole milliseconds wait on the process latch, as PostgreSQL's own waits do: a signal
    /// (a query cancel, a termination, a reload) ends the wait early, and the death of the
    /// postmaster ends the process. The part below a millisecond, which a latch timeout cannot
    /// express, is a plain sleep. The caller measures what really passed and decides again.
    fn sleep_ns(&mut self, ns: u64) {
        let ms = ns / NS_PER_MS as u64;
        if ms > 0 {
            wait_on_latch_ms(ms);
        } else {
            // SAFETY: a plain sleep; no lock or shared state is held across it.
            unsafe { pg_sys::pg_usleep(ns.div_ceil(NS_PER_US as u64) as std::ffi::c_long) };
            pgrx::check_for_interrupts!();
        }
    }
}

/// Waits on the process latch for at most `ms` milliseconds, as PostgreSQL's own waits do: a
/// signal (a query cancel, a termination, a reload) ends the wait early, and the death of the
/// postmaster ends the process. The caller holds no lock or shared state across it.
pub fn wait_on_latch_ms(ms: u64) {
    wait_on_latch_as(ms, pg_sys::PG_WAIT_EXTENSION);
}

/// [`wait_on_latch_ms`], shown in `pg_stat_activity` as `wait_event` (one of PostgreSQL's).
pub fn wait_on_latch_as(ms: u64, wait_event: u32) {
    let events = pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
    // SAFETY: MyLatch is this process's own latch, reset before looking at why it was set.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            events as std::ffi::c_int,
            ms.min(i32::MAX as u64) as std::ffi::c_long,
            wait_event,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    pgrx::check_for_interrupts!();
}
