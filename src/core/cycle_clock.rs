//! A wall clock read from the CPU's cycle counter, re-anchored to the real clock every
//! millisecond.
//!
//! # Why
//! The generators read the clock once per id, and on Linux `clock_gettime(CLOCK_REALTIME)` costs
//! about 20 ns even in the vDSO: with the kernel keeping time by the TSC it is itself a counter
//! read, ordered by a fence, scaled by the kernel's multiplier and guarded by a sequence lock.
//! That was half of `snowflake_next`'s cost. A bare counter read and one multiply cost about half
//! as much.
//!
//! # How
//! [`Extrapolator`] keeps an *anchor*: a counter value and the Unix time read together with it,
//! and the counter's rate in nanoseconds per cycle. A reading less than [`RESYNC_NS`] of counter
//! time past the anchor is extrapolated from it:
//!
//! ```text
//! now = anchor_ns + (cycles - anchor_cycles) * rate
//! ```
//!
//! Everything else reads the real clock, which becomes the new anchor: the first call, a counter
//! that went backwards, [`RESYNC_NS`] of counter time or [`RESYNC_CALLS`] calls since the anchor.
//! Each new anchor also re-measures the rate over the interval since the previous one.
//!
//! # What it guarantees
//! - An extrapolated time never lies more than [`RESYNC_NS`] past the real reading it was
//!   extrapolated from, whatever the counter does: the counter distance is checked against the
//!   cycles that make up [`RESYNC_NS`] at the current rate before it is multiplied.
//! - The real clock is read at least once per [`RESYNC_NS`] of counter time and once per
//!   [`RESYNC_CALLS`] calls, so a clock step (NTP, a resumed VM) shows within a millisecond of a
//!   busy backend's time, and a stalled counter cannot freeze the clock.
//! - A rate is measured over at least [`MIN_CALIBRATION_NS`], and used only while successive
//!   measurements agree within [`RATE_AGREEMENT`]: the first one needs a second to confirm it,
//!   and one that disagrees (a clock step inside the interval, a counter that changed speed)
//!   stops extrapolation until the next measurement confirms it. Meanwhile every call reads the
//!   real clock.
//! - The millisecond of a reading is the real clock's: readings within [`BOUNDARY_GUARD_NS`] of
//!   a millisecond boundary are real ones, and extrapolation errs by less than that.
//!
//! # The error budget
//! For a counter of at least 1 GHz (every x86-64 TSC), between two re-anchorings:
//! - an anchor's counter value is the midpoint of two reads at most [`MAX_PAIR_CYCLES`] apart:
//!   within 0.5 µs of the real reading;
//! - so a rate measured over at least [`MIN_CALIBRATION_NS`] is within 0.2% of the counter's
//!   true rate over that interval;
//! - the rate may change from one interval to the next by what [`RATE_AGREEMENT`] lets through,
//!   0.5% (NTP slews the clock by at most 0.05%), so the rate in use errs by at most 0.7%;
//! - over at most [`RESYNC_NS`] that is 7 µs, 7.5 µs with the anchor: below the 10 µs guard.
//!
//! Measured on this project's x86-64 VM (`cargo run --release --example clock_accuracy`),
//! readings stay within about 120 ns of `clock_gettime`. Ids stay unique whatever the clock says (that is the state word's job, `crate::core::monotonic`); the clock only decides
//! which millisecond they carry.
//!
//! Whether a process may use the counter at all (an x86-64 TSC that the kernel itself keeps time
//! with, and `snowflake_id.clock_source`) is the glue's decision, in `crate::clock`.

use super::time::NS_PER_MS;

/// The longest counter interval that is extrapolated: 1 ms.
pub const RESYNC_NS: u64 = NS_PER_MS as u64;
/// Extrapolated readings between two real ones, at most: with ids costing tens of nanoseconds
/// this is a few milliseconds, so it only matters for a counter that stopped.
pub const RESYNC_CALLS: u32 = 1 << 16;
/// The shortest interval a rate is measured over: 500 µs, so that anchors 0.5 µs off make the
/// rate at most 0.2% off. A backend's first millisecond of calls measures twice and reads the
/// real clock meanwhile.
pub const MIN_CALIBRATION_NS: i64 = 500_000;
/// How far two successive rate measurements may differ: 1/200, 0.5%.
pub const RATE_AGREEMENT: u64 = 200;
/// An extrapolated reading this close to a millisecond boundary (either side) is replaced by a
/// real one, so that extrapolation errors below this (see the error budget above) never change
/// the millisecond, and with it the tick, an id carries. Costs a real reading on 2% of calls.
pub const BOUNDARY_GUARD_NS: i64 = 10_000;
/// A real reading whose bracketing counter reads are further apart than this was interrupted
/// (preempted, a cache miss, a slow clock read): it is used as a time, but not as an anchor. A
/// vDSO clock read takes about 60 cycles.
pub const MAX_PAIR_CYCLES: u64 = 1 << 10;
/// Fixed-point scale of the rate: nanoseconds per cycle times 2^32.
const RATE_SHIFT: u32 = 32;
/// Plausible counter frequencies: from 50 MHz (20 ns per cycle) to 20 GHz (0.05 ns per cycle).
const MIN_RATE: u64 = (1 << RATE_SHIFT) / 20;
const MAX_RATE: u64 = 20 << RATE_SHIFT;

/// Where the time comes from: the counter, and the real clock read between two counter reads.
pub trait CycleSource {
    /// The counter: cheap, steadily increasing at a fixed rate.
    fn cycles(&mut self) -> u64;
    /// The real clock, in Unix nanoseconds.
    fn real_unix_ns(&mut self) -> i64;
}

/// One process's anchor and rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extrapolator {
    anchor_cycles: u64,
    anchor_ns: i64,
    anchored: bool,
    /// Nanoseconds per cycle, times 2^32; 0 while unknown.
    rate: u64,
    /// A measured rate waiting for the next measurement to confirm it; 0 for none.
    candidate: u64,
    /// The counter distance that makes [`RESYNC_NS`] at `rate`; 0 while the rate is unknown, so
    /// that nothing is extrapolated then.
    max_cycles: u64,
    /// Extrapolations left before a real reading is due.
    calls_left: u32,
}

impl Default for Extrapolator {
    fn default() -> Self {
        Self::new()
    }
}

impl Extrapolator {
    /// The state before the first reading.
    pub const fn new() -> Self {
        Extrapolator {
            anchor_cycles: 0,
            anchor_ns: 0,
            anchored: false,
            rate: 0,
            candidate: 0,
            max_cycles: 0,
            calls_left: 0,
        }
    }

    /// The current Unix time in nanoseconds: extrapolated when the anchor allows, else read.
    #[inline]
    pub fn now(&mut self, src: &mut impl CycleSource) -> i64 {
        let cycles = src.cycles();
        let since = cycles.wrapping_sub(self.anchor_cycles);
        // A counter behind the anchor wraps to a huge distance and fails this test as well.
        if since < self.max_cycles && self.calls_left > 0 {
            // since < max_cycles keeps the product below RESYNC_NS << RATE_SHIFT: no overflow.
            let t = self.anchor_ns + ((since * self.rate) >> RATE_SHIFT) as i64;
            // Near a millisecond boundary the real clock decides which side the reading is on.
            if (t + BOUNDARY_GUARD_NS).rem_euclid(NS_PER_MS) >= 2 * BOUNDARY_GUARD_NS {
                self.calls_left -= 1;
                return t;
            }
        }
        self.resync(src, cycles)
    }

    /// Whether readings are being extrapolated (a rate is known).
    pub const fn extrapolating(&self) -> bool {
        self.max_cycles > 0
    }

    #[cold]
    #[inline(never)]
    fn resync(&mut self, src: &mut impl CycleSource, before: u64) -> i64 {
        let ns = src.real_unix_ns();
        let after = src.cycles();
        let spread = after.wrapping_sub(before);
        if spread > MAX_PAIR_CYCLES {
            // Interrupted between the reads (or a counter that went backwards): a good time,
            // a bad anchor. The next call tries again.
            self.stop_extrapolating();
            return ns;
        }
        let cycles = before + spread / 2;
        if !self.anchored || cycles < self.anchor_cycles || ns < self.anchor_ns {
            // First reading, a counter that went backwards, or a clock that stepped back:
            // start measuring the rate afresh from here.
            (self.rate, self.candidate) = (0, 0);
            self.anchor(cycles, ns);
            return ns;
        }
        let (d_ns, d_cycles) = ((ns - self.anchor_ns) as u64, cycles - self.anchor_cycles);
        if d_ns < MIN_CALIBRATION_NS as u64 {
            // Too short to measure a rate (a re-anchoring near a millisecond boundary, or forced
            // by the call count). With a rate, move the anchor; without one, keep it and let
            // the interval grow.
            if self.rate == 0 {
                self.stop_extrapolating();
            } else {
                self.anchor(cycles, ns);
            }
            return ns;
        }
        // A rate is used only when two successive measurements agree: the one before (the rate
        // in use, or a candidate) and this one. Anything else makes this one the candidate.
        let reference = if self.rate != 0 { self.rate } else { self.candidate };
        match measure_rate(d_ns, d_cycles) {
            Some(m) if reference != 0 && agrees(m, reference) => (self.rate, self.candidate) = (m, 0),
            Some(m) => (self.rate, self.candidate) = (0, m),
            None => (self.rate, self.candidate) = (0, 0),
        }
        self.anchor(cycles, ns);
        ns
    }

    fn anchor(&mut self, cycles: u64, ns: i64) {
        self.anchor_cycles = cycles;
        self.anchor_ns = ns;
        self.anchored = true;
        // 0 while the rate is unknown: nothing is extrapolated then.
        self.max_cycles = (RESYNC_NS << RATE_SHIFT).checked_div(self.rate).unwrap_or(0);
        self.calls_left = RESYNC_CALLS;
    }

    fn stop_extrapolating(&mut self) {
        self.max_cycles = 0;
    }
}

/// Nanoseconds per cycle, fixed point, if plausible for a counter.
fn measure_rate(d_ns: u64, d_cycles: u64) -> Option<u64> {
    if d_cycles == 0 {
        return None;
    }
    let rate = (u128::from(d_ns) << RATE_SHIFT) / u128::from(d_cycles);
    u64::try_from(rate).ok().filter(|r| (MIN_RATE..=MAX_RATE).contains(r))
}

/// Whether two rates agree within [`RATE_AGREEMENT`].
fn agrees(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= b / RATE_AGREEMENT
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = NS_PER_MS;
    const T0: i64 = 1_764_000_000 * 1_000_000_000;

    /// A counter at `ghz` cycles per ns and a real clock, both driven by a true time that only
    /// moves when a test says so. The real clock reads true time plus `offset_ns` (a step).
    struct Fake {
        true_ns: i64,
        ghz: f64,
        /// The counter value and true time the current speed started at.
        base_cycles: i64,
        base_ns: i64,
        offset_ns: i64,
        /// Added to the counter (a jump, or a different socket's counter).
        jump: i64,
        stalled: Option<u64>,
        /// True time that passes inside the next real clock read (preemption).
        preempt_ns: i64,
        real_reads: usize,
    }

    impl Fake {
        fn new(ghz: f64) -> Fake {
            Fake {
                true_ns: T0,
                ghz,
                base_cycles: 987_654_321,
                base_ns: T0,
                offset_ns: 0,
                jump: 0,
                stalled: None,
                preempt_ns: 0,
                real_reads: 0,
            }
        }
        fn real(&self) -> i64 {
            self.true_ns + self.offset_ns
        }
        fn set_speed(&mut self, ghz: f64) {
            self.base_cycles = self.cycles() as i64;
            self.base_ns = self.true_ns;
            self.jump = 0;
            self.ghz = ghz;
        }
    }

    impl CycleSource for Fake {
        fn cycles(&mut self) -> u64 {
            if let Some(c) = self.stalled {
                return c;
            }
            (self.base_cycles + ((self.true_ns - self.base_ns) as f64 * self.ghz) as i64 + self.jump) as u64
        }
        fn real_unix_ns(&mut self) -> i64 {
            self.real_reads += 1;
            let t = self.real();
            self.true_ns += self.preempt_ns;
            self.preempt_ns = 0;
            t
        }
    }

    /// `n` readings `step_ns` apart; returns the largest |reading - real clock|.
    fn run(x: &mut Extrapolator, f: &mut Fake, n: usize, step_ns: i64) -> i64 {
        (0..n)
            .map(|_| {
                f.true_ns += step_ns;
                (x.now(f) - f.real()).abs()
            })
            .max()
            .unwrap_or(0)
    }

    /// An extrapolator that has measured the counter's rate.
    fn calibrated(f: &mut Fake) -> Extrapolator {
        let mut x = Extrapolator::default();
        run(&mut x, f, 50_000, 25);
        assert!(x.extrapolating());
        x
    }

    #[test]
    fn a_steady_counter_is_extrapolated_to_the_nanosecond_and_read_once_a_millisecond() {
        for ghz in [1.0, 2.45, 3.7] {
            let mut f = Fake::new(ghz);
            let mut x = Extrapolator::default();
            // The first millisecond measures the rate twice: every call there reads the real clock.
            let calibration = (2 * MIN_CALIBRATION_NS / 30) as usize;
            assert_eq!(run(&mut x, &mut f, calibration, 30), 0);
            assert_eq!(f.real_reads, calibration);
            assert!(!x.extrapolating(), "{ghz} GHz: still measuring");
            run(&mut x, &mut f, 10, 30);
            assert!(x.extrapolating(), "{ghz} GHz: calibrated after 1 ms");
            // Then 100 ms of calls 30 ns apart: real reads for the 2% of calls within the guard
            // of a millisecond boundary, and about one re-anchor per millisecond.
            f.real_reads = 0;
            let calls = (100 * MS / 30) as usize;
            let err = run(&mut x, &mut f, calls, 30);
            assert!(err <= 2, "{ghz} GHz: off by {err} ns");
            let guarded = calls * 2 * BOUNDARY_GUARD_NS as usize / MS as usize;
            assert!(
                (guarded..=guarded + 101).contains(&f.real_reads),
                "{ghz} GHz: {} real reads in 100 ms, {guarded} of them near a boundary",
                f.real_reads
            );
        }
    }

    #[test]
    fn a_clock_step_shows_within_a_millisecond() {
        for step in [-3_600_000 * MS, -5 * MS, -20_000, 20_000, 5 * MS, 3_600_000 * MS] {
            let mut f = Fake::new(3.0);
            let mut x = calibrated(&mut f);
            f.offset_ns = step;
            // Extrapolated readings still follow the counter until the next real reading...
            let (start, mut caught_up) = (f.true_ns, None);
            while caught_up.is_none() {
                f.true_ns += 25;
                if x.now(&mut f) == f.real() {
                    caught_up = Some(f.true_ns - start);
                }
            }
            // ...which is at most a millisecond of counter time away.
            assert!(caught_up.unwrap() <= RESYNC_NS as i64, "step {step}: caught up after {caught_up:?} ns");
            // The step spoiled that interval's rate measurement, so the rate is measured again
            // (the readings are real meanwhile), and extrapolation resumes.
            assert_eq!(run(&mut x, &mut f, 2_000, 25), 0, "step {step}: real readings while re-measuring");
            run(&mut x, &mut f, 100_000, 25);
            assert!(x.extrapolating(), "step {step}: extrapolating again");
            assert!(run(&mut x, &mut f, 100_000, 25) <= 2, "step {step}");
        }
    }

    #[test]
    fn a_jumping_counter_never_carries_the_time_more_than_a_millisecond_ahead() {
        for jump in [1_000i64, 2_000_000, 3_000_000_000, -5_000, -3_000_000_000] {
            let mut f = Fake::new(3.0);
            let mut x = calibrated(&mut f);
            f.jump = jump;
            for _ in 0..200_000 {
                f.true_ns += 25;
                let t = x.now(&mut f);
                assert!(t <= f.real() + RESYNC_NS as i64, "jump {jump}: {t} vs {}", f.real());
            }
            assert!(run(&mut x, &mut f, 100_000, 25) <= 2, "jump {jump}: back in step");
        }
    }

    #[test]
    fn a_stalled_counter_falls_back_to_the_real_clock() {
        let mut f = Fake::new(3.0);
        let mut x = calibrated(&mut f);
        f.stalled = Some(f.cycles());
        f.real_reads = 0;
        let n = 4 * RESYNC_CALLS as usize;
        let err = run(&mut x, &mut f, n, 25);
        // The frozen counter is extrapolated for at most RESYNC_CALLS calls (time stands still
        // meanwhile); the real reading then shows it measures no rate, and every later call reads
        // the real clock.
        assert!(err <= i64::from(RESYNC_CALLS) * 25, "lag {err}");
        assert!(f.real_reads >= n - RESYNC_CALLS as usize, "{} real reads of {n}", f.real_reads);
        assert!(!x.extrapolating());
    }

    #[test]
    fn every_reading_carries_the_real_clocks_millisecond() {
        // A counter whose speed wobbles by 0.5% every millisecond: each rate measurement agrees
        // with the last, yet is always a millisecond stale, so readings err by microseconds.
        let mut f = Fake::new(3.0);
        let mut x = calibrated(&mut f);
        let (mut worst, mut real_reads, mut wrong_ms) = (0, 0, 0);
        for ms in 0..200 {
            f.set_speed(if ms % 2 == 0 { 3.015 } else { 3.0 });
            f.real_reads = 0;
            for _ in 0..(MS / 37) {
                f.true_ns += 37;
                let t = x.now(&mut f);
                worst = worst.max((t - f.real()).abs());
                wrong_ms += usize::from(t.div_euclid(MS) != f.real().div_euclid(MS));
            }
            real_reads += f.real_reads;
        }
        assert!(worst > 1_000, "the wobble does make readings err ({worst} ns)");
        assert_eq!(wrong_ms, 0, "but never by a millisecond boundary");
        // The guard reads the real clock on about 2% of calls, plus one re-anchor per ms.
        let calls = 200 * (MS / 37) as usize;
        assert!(real_reads < calls / 30, "{real_reads} real reads of {calls}");
    }

    #[test]
    fn a_counter_that_changes_speed_is_measured_again() {
        let mut f = Fake::new(3.0);
        let mut x = calibrated(&mut f);
        f.set_speed(3.3);
        // 10% fast until the next real reading (at most 1 ms away): at most 100 µs off. That
        // reading's rate disagrees with the old one, so the rate is dropped and re-measured.
        let worst = run(&mut x, &mut f, 200_000, 25);
        assert!(worst > 1_000 && worst <= (RESYNC_NS / 10) as i64 + 100, "worst {worst} ns while re-learning");
        assert!(run(&mut x, &mut f, 100_000, 25) <= 2);
    }

    #[test]
    fn an_interrupted_reading_is_a_time_but_not_an_anchor() {
        let mut f = Fake::new(3.0);
        let mut x = calibrated(&mut f);
        // Past the window, so the next call reads the real clock, and is preempted inside.
        f.true_ns += 2 * MS;
        f.preempt_ns = 5 * MS;
        let before = f.real();
        assert_eq!(x.now(&mut f), before, "the reading itself is the real clock at the call");
        assert!(!x.extrapolating(), "a preempted pair does not anchor");
        // The next call anchors again, the rate still agrees, and extrapolation resumes.
        assert_eq!(run(&mut x, &mut f, 1, 25), 0);
        assert!(x.extrapolating());
        assert!(run(&mut x, &mut f, 100_000, 25) <= 2);
    }

    #[test]
    fn a_first_measurement_spoiled_by_a_clock_step_is_never_used() {
        let mut f = Fake::new(3.0);
        let mut x = Extrapolator::default();
        run(&mut x, &mut f, 1, 25);
        // The clock steps forward by 50 µs in the middle of the first measurement (over 500 µs
        // of counter time): it measures a rate 10% too high, a plausible counter, which the next
        // measurement refutes.
        run(&mut x, &mut f, 10_000, 25);
        f.offset_ns = 50_000;
        let worst = run(&mut x, &mut f, 100_000, 25);
        assert!(worst <= 2, "no extrapolation from the unconfirmed rate: off by {worst} ns");
        assert!(x.extrapolating(), "two agreeing measurements after the step");
        assert!(run(&mut x, &mut f, 100_000, 25) <= 2);
    }

    #[test]
    fn rates_are_plausible_or_nothing() {
        assert_eq!(measure_rate(1000, 0), None);
        assert_eq!(measure_rate(1_000_000, 3_000_000), Some((1u64 << 32) / 3));
        assert_eq!(measure_rate(1_000_000, 1_000), None, "1 MHz is no cycle counter");
        assert_eq!(measure_rate(1_000, 1_000_000), None, "1 THz neither");
        assert!(agrees(1000, 1005) && !agrees(1000, 1006), "0.5%");
    }
}
