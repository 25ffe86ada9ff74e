//! The operating system's clocks, read directly and never shifted: `CLOCK_REALTIME` and
//! `CLOCK_MONOTONIC`, and whether the kernel keeps time with the TSC. The generators' clock,
//! which may extrapolate from the TSC and carries the fault-injection offset, is
//! `crate::runtime::clock`, above the settings it reads.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::core::time::{NS_PER_MS, NS_PER_SEC, NS_PER_US};

/// `clock_gettime(CLOCK_REALTIME)`, straight from libc.
#[inline]
pub fn real_unix_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    // i64 nanoseconds last until 2262; the clock cannot read past that on a running server.
    ts.tv_sec.wrapping_mul(NS_PER_SEC).wrapping_add(ts.tv_nsec)
}

/// `CLOCK_REALTIME` in milliseconds: what the reservation file records as its write time, and what
/// a layout's epoch is checked against (never a shifted test clock).
pub fn real_unix_ms() -> i64 {
    real_unix_ns().div_euclid(NS_PER_MS)
}

/// `CLOCK_REALTIME` in microseconds: what the fleet check compares across servers.
pub fn real_unix_us() -> i64 {
    real_unix_ns().div_euclid(NS_PER_US)
}

/// `CLOCK_MONOTONIC` in nanoseconds: what waits are measured on.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(NS_PER_SEC as u64).wrapping_add(ts.tv_nsec as u64)
}

/// Whether the kernel keeps time with the TSC (`current_clocksource` is `tsc`). Only then is the
/// TSC known to be invariant and synchronised across CPUs: the kernel checked, and
/// `clock_gettime` itself reads it. Decided once, at load, in the postmaster when preloaded.
static KERNEL_USES_TSC: AtomicBool = AtomicBool::new(false);

/// Looks at the kernel's clocksource. Call from `_PG_init`.
pub fn init() {
    let tsc = cfg!(target_arch = "x86_64")
        && std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc");
    KERNEL_USES_TSC.store(tsc, Ordering::Relaxed);
}

/// Whether `snowflake_id.clock_source = auto` reads the TSC on this server.
pub fn tsc_available() -> bool {
    KERNEL_USES_TSC.load(Ordering::Relaxed)
}
