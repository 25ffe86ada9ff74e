//! How close the TSC clock (`snowflake_id.clock_source = auto`) stays to `CLOCK_REALTIME` on this
//! machine, and what each costs per reading. Not a test: machines differ, and this one is shared.
//!
//!     cargo run --release --example clock_accuracy [readings]
//!
//! It runs the extension's own extrapolator (`src/core/cycle_clock.rs`, compiled in here, since
//! the extension itself is a PostgreSQL-only cdylib) between two `clock_gettime` reads, and counts
//! readings whose millisecond falls outside theirs, the furthest a reading ran ahead of the read
//! after it or behind the read before it, and the time per reading of each clock.

/// The one item `cycle_clock.rs` takes from `src/core/time.rs`, which is not compiled in here: it
/// leans on the rest of the core.
mod time {
    pub const NS_PER_MS: i64 = 1_000_000;
}

#[path = "../src/core/cycle_clock.rs"]
#[allow(dead_code)]
mod cycle_clock;

use std::time::Instant;

use cycle_clock::{CycleSource, Extrapolator};

fn realtime_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

struct Tsc;

impl CycleSource for Tsc {
    fn cycles(&mut self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: RDTSC exists on every x86-64 CPU.
        return unsafe { core::arch::x86_64::_rdtsc() };
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("checked in main")
    }
    fn real_unix_ns(&mut self) -> i64 {
        realtime_ns()
    }
}

fn main() {
    let clocksource = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    println!("kernel clocksource: {clocksource}");
    if !cfg!(target_arch = "x86_64") || clocksource != "tsc" {
        println!("clock_source = auto uses clock_gettime here: nothing to compare");
        return;
    }
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000_000);
    let mut x = Extrapolator::new();
    let (mut wrong_ms, mut ahead, mut behind, mut measured) = (0usize, 0i64, 0i64, 0usize);
    for _ in 0..n {
        let before = realtime_ns();
        let t = x.now(&mut Tsc);
        let after = realtime_ns();
        let ms = t.div_euclid(1_000_000);
        if ms < before.div_euclid(1_000_000) || ms > after.div_euclid(1_000_000) {
            wrong_ms += 1;
        }
        // Skip brackets stretched by preemption: they say nothing about the clock.
        if after - before < 1_000 {
            measured += 1;
            ahead = ahead.max(t - after);
            behind = behind.max(before - t);
        }
    }
    println!("{n} readings: {wrong_ms} with a millisecond outside the clock_gettime reads around them");
    println!("  of {measured} tightly bracketed: at most {ahead} ns ahead of the read after, {behind} ns behind the read before");
    let time = |f: &mut dyn FnMut() -> i64| {
        let (start, mut sum) = (Instant::now(), 0i64);
        for _ in 0..n {
            sum = sum.wrapping_add(f());
        }
        (start.elapsed().as_nanos() as f64 / n as f64, sum)
    };
    let (tsc_ns, a) = time(&mut || x.now(&mut Tsc));
    let (sys_ns, b) = time(&mut realtime_ns);
    println!("per reading: TSC clock {tsc_ns:.1} ns, clock_gettime {sys_ns:.1} ns ({})", (a ^ b) & 1);
}
