//! A wall clock read from the CPU's cycle counter, re-anchored to the real clock every 12 µs.
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
//!
//! The rate is measured apart from the anchor, over a longer interval: from a *calibration
//! anchor* (an earlier anchor) to the first anchor at least [`MIN_CALIBRATION_NS`] after it, which
//! becomes the calibration anchor of the next measurement. Anchors are frequent so that a rate
//! that has gone wrong has little time to err; measurements are long so that the anchors' own
//! jitter barely moves them. A busy backend pays one real reading (about 50 ns) per [`RESYNC_NS`]
//! for this, under 0.5% of its time; the extrapolated path is the same counter read, compare,
//! multiply and guard test as ever.
//!
//! # What it guarantees
//! - An extrapolated time never lies more than [`RESYNC_NS`] past the real reading it was
//!   extrapolated from, whatever the counter does: the counter distance is checked against the
//!   cycles that make up [`RESYNC_NS`] at the current rate before it is multiplied.
//! - The real clock is read at least once per [`RESYNC_NS`] of counter time and once per
//!   [`RESYNC_CALLS`] calls, so a clock step (NTP, a resumed VM) shows within 12 µs of a busy
//!   backend's time, and a stalled counter cannot freeze the clock.
//! - The rate is measured again once [`MIN_CALIBRATION_NS`] have passed since the last
//!   measurement (so at least every [`MIN_CALIBRATION_NS`] + [`RESYNC_NS`] of a busy backend's
//!   time), each time over at least [`MIN_CALIBRATION_NS`], and used only while successive
//!   measurements agree within [`RATE_AGREEMENT`]: the first one needs a second to confirm it, and
//!   one that disagrees (a clock step inside the interval, a counter that changed speed, an NTP
//!   slew starting or stopping) stops extrapolation until the next measurement confirms it.
//!   Meanwhile every call reads the real clock.
//! - A real reading that was interrupted (its two counter reads further apart than
//!   [`MAX_PAIR_CYCLES`]) is returned as the time but never becomes an anchor, and a clock that
//!   stepped back behind the anchor, or a counter that went backwards, restarts the measurement.
//! - The millisecond of a reading is the real clock's, however abruptly the real clock's rate
//!   changes within the kernel's bounds (below): readings within [`BOUNDARY_GUARD_NS`] of a
//!   millisecond boundary are real ones, and extrapolation errs by less than that. (A clock step
//!   shows at the next real reading, as above: until then readings carry the millisecond the
//!   clock had before it.)
//!
//! # The error budget
//! The real clock's rate against the counter is not constant. NTP daemons slew it, chrony by up
//! to 8.3% by default (`maxslewrate` 83,333 ppm), and they change that rate abruptly, at any
//! instant. The kernel bounds what they can ask with four terms, which add up (Linux,
//! `kernel/time/`):
//! - the length of a tick, `tick`: within ±10% of nominal (`timekeeping_validate_timex` in
//!   `timekeeping.c` refuses anything else);
//! - the frequency, `time_freq`: within ±500 ppm (`MAXFREQ`), whether `ADJ_FREQUENCY` sets it or
//!   the PLL moves it (`process_adjtimex_modes` and `ntp_update_offset` in `ntp.c` clamp it);
//! - the PLL's phase correction, with `STA_PLL` (ntpd's kernel discipline; chrony's default does
//!   not use it): each second `second_overflow` in `ntp.c` adds `ntp_offset_chunk(time_offset)`,
//!   the offset shifted right by `SHIFT_PLL` (2) plus `time_constant` (0 or more), and
//!   `ntp_update_offset` clamps the offset to `MAXPHASE`, 0.5 s: up to 125 ms a second, ±12.5%;
//! - `adjtime()` (`ADJ_OFFSET_SINGLESHOT`), which `ntp.c` keeps apart from the PLL in
//!   `time_adjust`: `second_overflow` adds up to `MAX_TICKADJ`, 500 µs a second, ±500 ppm, on top
//!   of the PLL's chunk.
//!
//! So the budget assumes that the real clock runs at between 0.774 and 1.226 times its nominal
//! rate against the counter ([`MAX_SLEW_PPM`]), and may jump from one end to the other at any
//! instant, a 45.2% change; nothing is assumed about when it changes. (One kernel configuration
//! goes further, and is outside the budget: with a PPS kernel consumer, `CONFIG_NTP_PPS`, and
//! `STA_PPSTIME` set while a PPS signal comes in, `ntp_offset_chunk` corrects the whole offset,
//! up to 0.5 s, in one second. That option needs a kernel without tickless support,
//! `!NO_HZ_COMMON`, which the usual distribution kernels are not.)
//!
//! For a counter of at least 1 GHz nominal (every x86-64 TSC):
//! - an anchor's counter value is the midpoint of two reads at most [`MAX_PAIR_CYCLES`] apart:
//!   within 512 cycles of the real reading, 0.63 µs at the fastest real clock;
//! - a rate is measured over at least [`MIN_CALIBRATION_NS`] of the real clock, at least 407,800
//!   cycles, so the two anchors' 1,024 cycles make it less than 0.26% off the real clock's mean
//!   rate over that interval, itself within the kernel's bounds;
//! - a measurement spoiled by a clock step (or a counter jump) is used only if it agrees with the
//!   one before, so it is at most [`RATE_AGREEMENT`], 0.5%, further off (this assumes that a step
//!   does not come in each of two successive measurements, under a millisecond apart);
//! - so the rate in use may be as low as 0.774 × 0.9975 × 0.995 of nominal while the real clock
//!   runs at 1.226: 59.6% faster than the rate in use (the opposite case is 37.3% slower);
//! - extrapolation covers at most [`RESYNC_NS`], 12 µs at the rate in use, which that rate error
//!   turns into 7.15 µs; with the anchor's 0.63 µs and a nanosecond of rounding, 7.8 µs: below the
//!   10 µs guard. A real clock 27% off nominal each way would still fit. 16 µs would not (10.2 µs),
//!   nor would the 32 µs this clock used while the budget left out the PLL (19.7 µs).
//!
//! [`worst_error_ns`] does this sum, and a compile-time assertion keeps it below
//! [`BOUNDARY_GUARD_NS`]. Re-anchoring every millisecond, as this clock once did, would let
//! chrony's own slews (a +8.3% slew reversed) carry readings 180 µs off.
//!
//! Rate changes also make successive measurements disagree now and then (a slew starting,
//! stopping or reversing): extrapolation then stops for about a millisecond, until two agree.
//! That costs real readings, never accuracy: the budget above bounds slews by the kernel's limits,
//! not by the agreement test, which is there to refuse measurements spoiled by a step.
//!
//! Measured on this project's x86-64 VM (`cargo run --release --example clock_accuracy`),
//! readings stay within about 150 ns of `clock_gettime`. Ids stay unique whatever the clock says
//! (that is the state word's job, `crate::core::monotonic`); the clock only decides which
//! millisecond they carry.
//!
//! Whether a process may use the counter at all (an x86-64 TSC that the kernel itself keeps time
//! with, and `snowflake_id.clock_source`) is the glue's decision, in `crate::runtime::clock`.

use super::time::NS_PER_MS;

/// The longest counter interval that is extrapolated: 12 µs, short enough for the worst rate
/// change the kernel allows, which it turns into at most 7.8 µs of error (see the error budget
/// above; 16 µs would come to 10.2 µs, past [`BOUNDARY_GUARD_NS`]).
pub const RESYNC_NS: u64 = 12_000;
/// Extrapolated readings between two real ones, at most: with ids costing tens of nanoseconds
/// this is over half a millisecond, so it only matters for a counter that stopped.
pub const RESYNC_CALLS: u32 = 1 << 16;
/// The shortest interval a rate is measured over: 500 µs, so that anchors 512 cycles off make the
/// rate less than 0.26% off. A backend's first millisecond of calls measures twice and reads the
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
/// The assumption of the error budget: the real clock's rate against the counter stays within
/// this many parts per million of nominal, ±22.6%: the most the kernel lets time daemons ask for,
/// four terms that add up (Linux `kernel/time/`, see the error budget above):
/// - `tick` ±10% (`timekeeping_validate_timex` in `timekeeping.c`);
/// - frequency ±500 ppm (`MAXFREQ`, clamped in `process_adjtimex_modes` and `ntp_update_offset`,
///   `ntp.c`);
/// - the PLL's phase correction ±12.5% (`ntp_offset_chunk` in `ntp.c`: `MAXPHASE`, 0.5 s, shifted
///   right by `SHIFT_PLL`, 2, plus a `time_constant` of 0, each second);
/// - `adjtime()` ±500 ppm (`MAX_TICKADJ`, 500 µs each second, in `second_overflow`, `ntp.c`).
///
/// It is not checked at run time.
pub const MAX_SLEW_PPM: u64 = 100_000 + 500 + 125_000 + 500;
/// The slowest counter the error budget allows for, in cycles per nanosecond.
const MIN_COUNTER_GHZ: f64 = 1.0;
/// Fixed-point scale of the rate: nanoseconds per cycle times 2^32.
const RATE_SHIFT: u32 = 32;
/// Plausible counter frequencies: from 50 MHz (20 ns per cycle) to 20 GHz (0.05 ns per cycle).
const MIN_RATE: u64 = (1 << RATE_SHIFT) / 20;
const MAX_RATE: u64 = 20 << RATE_SHIFT;

/// The error budget of the module doc: the furthest an extrapolated reading may be from the real
/// clock, in nanoseconds, when anchors are at most `resync_ns` of extrapolation apart and the
/// real clock's rate stays within `slew_ppm` of nominal however it changes.
pub const fn worst_error_ns(resync_ns: u64, slew_ppm: u64) -> f64 {
    let slew = slew_ppm as f64 / 1e6;
    // The real clock's rate against the counter, relative to nominal (nanoseconds per cycle
    // times the counter's nominal GHz).
    let (slowest, fastest) = (1.0 - slew, 1.0 + slew);
    // How far an anchor's counter value may be from the real reading's.
    let anchor_cycles = (MAX_PAIR_CYCLES / 2) as f64;
    // The fewest cycles a measurement spans, and how far its two anchors may move it.
    let span = MIN_CALIBRATION_NS as f64 * MIN_COUNTER_GHZ / fastest;
    let (low, high) = (span / (span + 2.0 * anchor_cycles), span / (span - 2.0 * anchor_cycles));
    // A spoiled measurement let through by the agreement test.
    let agreement = 1.0 / RATE_AGREEMENT as f64;
    // The rate in use, relative to nominal, and how far the real clock's may be from it.
    let (lowest_rate, highest_rate) = (slowest * low * (1.0 - agreement), fastest * high * (1.0 + agreement));
    let (too_slow, too_fast) = (fastest / lowest_rate - 1.0, 1.0 - slowest / highest_rate);
    let rate_error = if too_slow > too_fast { too_slow } else { too_fast };
    // The extrapolated distance is below resync_ns at the rate in use; the anchor is off by its
    // cycles at the real clock's rate; the fixed-point product truncates by under a nanosecond.
    resync_ns as f64 * rate_error + anchor_cycles * fastest / MIN_COUNTER_GHZ + 1.0
}

const _: () = assert!(
    worst_error_ns(RESYNC_NS, MAX_SLEW_PPM) < BOUNDARY_GUARD_NS as f64,
    "the extrapolation error budget must stay below the millisecond boundary guard"
);
const _: () = assert!(MIN_CALIBRATION_NS as u64 > RESYNC_NS, "rates are measured over several anchors");

/// Where the time comes from: the counter, and the real clock read between two counter reads.
pub trait CycleSource {
    /// The counter: cheap, steadily increasing at a fixed rate.
    fn cycles(&mut self) -> u64;
    /// The real clock, in Unix nanoseconds.
    fn real_unix_ns(&mut self) -> i64;
}

/// One process's anchors and rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extrapolator {
    /// The anchor readings are extrapolated from: the latest real reading that was not
    /// interrupted.
    anchor_cycles: u64,
    anchor_ns: i64,
    anchored: bool,
    /// The calibration anchor the next rate measurement starts from: an anchor no later than
    /// the one above.
    calibration_cycles: u64,
    calibration_ns: i64,
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
            calibration_cycles: 0,
            calibration_ns: 0,
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
            (self.calibration_cycles, self.calibration_ns) = (cycles, ns);
            self.anchor(cycles, ns);
            return ns;
        }
        // The calibration anchor is an earlier anchor: neither difference is negative.
        let d_ns = (ns - self.calibration_ns) as u64;
        if d_ns >= MIN_CALIBRATION_NS as u64 {
            // A rate is used only when two successive measurements agree: the one before (the
            // rate in use, or a candidate) and this one. Anything else makes this one the
            // candidate. Shorter intervals only move the anchor, and the rate stays.
            let reference = if self.rate != 0 { self.rate } else { self.candidate };
            match measure_rate(d_ns, cycles - self.calibration_cycles) {
                Some(m) if reference != 0 && agrees(m, reference) => (self.rate, self.candidate) = (m, 0),
                Some(m) => (self.rate, self.candidate) = (0, m),
                None => (self.rate, self.candidate) = (0, 0),
            }
            (self.calibration_cycles, self.calibration_ns) = (cycles, ns);
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
    /// moves when a test says so. The real clock reads true time plus `offset_ns` (a step), at
    /// `1 + slew` times the true rate since `slew_true_ns` (an NTP slew).
    struct Fake {
        true_ns: i64,
        ghz: f64,
        /// The counter value and true time the current speed started at.
        base_cycles: i64,
        base_ns: i64,
        offset_ns: i64,
        /// The real clock's rate against true time, minus 1, since true time `slew_true_ns`,
        /// when the real clock (less `offset_ns`) read `slew_real_ns`.
        slew: f64,
        slew_true_ns: i64,
        slew_real_ns: i64,
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
                slew: 0.0,
                slew_true_ns: T0,
                slew_real_ns: T0,
                jump: 0,
                stalled: None,
                preempt_ns: 0,
                real_reads: 0,
            }
        }
        fn real(&self) -> i64 {
            let slewed = ((self.true_ns - self.slew_true_ns) as f64 * (1.0 + self.slew)).round() as i64;
            self.slew_real_ns + slewed + self.offset_ns
        }
        fn set_speed(&mut self, ghz: f64) {
            self.base_cycles = self.cycles() as i64;
            self.base_ns = self.true_ns;
            self.jump = 0;
            self.ghz = ghz;
        }
        /// From now on the real clock runs `1 + slew` times as fast as true time (and the
        /// counter).
        fn set_slew(&mut self, slew: f64) {
            self.slew_real_ns = self.real() - self.offset_ns;
            self.slew_true_ns = self.true_ns;
            self.slew = slew;
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

    /// A small deterministic generator of irregular steps (a 64-bit LCG's high bits).
    struct Lcg(u64);

    impl Lcg {
        /// A number in `lo..=hi`.
        fn between(&mut self, lo: i64, hi: i64) -> i64 {
            self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            lo + ((self.0 >> 33) % (hi - lo + 1) as u64) as i64
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
    fn the_error_budget_fits_the_guard() {
        let worst = worst_error_ns(RESYNC_NS, MAX_SLEW_PPM);
        // The figures of the module doc.
        assert_eq!(MAX_SLEW_PPM, 226_000, "±22.6%");
        assert_eq!((worst / 100.0).round(), 78.0, "7.8 µs: {worst} ns");
        assert!(worst < BOUNDARY_GUARD_NS as f64);
        assert!(worst_error_ns(RESYNC_NS, 270_000) < BOUNDARY_GUARD_NS as f64, "a real clock 27% off fits");
        assert!(worst_error_ns(RESYNC_NS, 280_000) > BOUNDARY_GUARD_NS as f64, "28% does not");
        // Longer resync intervals do not fit the kernel's bounds.
        let sixteen = worst_error_ns(16_000, MAX_SLEW_PPM);
        assert_eq!((sixteen / 100.0).round(), 102.0, "16 µs: {sixteen} ns");
        let old = worst_error_ns(32_000, MAX_SLEW_PPM);
        assert_eq!((old / 100.0).round(), 197.0, "32 µs: {old} ns");
        // Without slews, what remains is the anchor and the measurement error.
        assert!(worst_error_ns(RESYNC_NS, 0) < 800.0);
        // A millisecond between anchors does not fit even chrony's default slew.
        let chrony = worst_error_ns(NS_PER_MS as u64, 83_333);
        assert!(chrony > 180_000.0, "{chrony} ns");
    }

    #[test]
    fn a_steady_counter_is_extrapolated_to_the_nanosecond_and_read_once_per_resync_interval() {
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
            // of a millisecond boundary, and one re-anchor per RESYNC_NS outside the guard.
            f.real_reads = 0;
            let calls = (100 * MS / 30) as usize;
            let err = run(&mut x, &mut f, calls, 30);
            assert!(err <= 2, "{ghz} GHz: off by {err} ns");
            let guarded = calls * 2 * BOUNDARY_GUARD_NS as usize / MS as usize;
            // Per millisecond, the MS - 2 * guard outside the guard, cut into RESYNC_NS pieces.
            let per_ms = (MS - 2 * BOUNDARY_GUARD_NS) as usize;
            let anchors = 100 * per_ms.div_ceil(RESYNC_NS as usize);
            assert!(
                (guarded + anchors - 100..=guarded + anchors + 100).contains(&f.real_reads),
                "{ghz} GHz: {} real reads in 100 ms, {guarded} of them near a boundary, {anchors} re-anchors",
                f.real_reads
            );
        }
    }

    #[test]
    fn a_clock_step_shows_within_a_resync_interval() {
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
            // ...which is at most RESYNC_NS of counter time away.
            assert!(caught_up.unwrap() <= RESYNC_NS as i64, "step {step}: caught up after {caught_up:?} ns");
            // From there readings follow the stepped clock. The step spoils the rate measurement
            // that spans it, so the rate is measured again (the readings are real meanwhile), and
            // extrapolation resumes.
            let mut paused = false;
            for _ in 0..100_000 {
                assert!(run(&mut x, &mut f, 1, 25) <= 2, "step {step}");
                paused |= !x.extrapolating();
            }
            assert!(paused, "step {step}: the spoiled measurement was refused");
            assert!(x.extrapolating(), "step {step}: extrapolating again");
            assert!(run(&mut x, &mut f, 100_000, 25) <= 2, "step {step}");
        }
    }

    #[test]
    fn a_jumping_counter_never_carries_the_time_more_than_a_resync_interval_ahead() {
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
        // meanwhile); the next rate measurement then shows it measures no rate, and every later
        // call reads the real clock.
        assert!(err <= i64::from(RESYNC_CALLS) * 25, "lag {err}");
        assert!(f.real_reads >= n - RESYNC_CALLS as usize, "{} real reads of {n}", f.real_reads);
        assert!(!x.extrapolating());
    }

    #[test]
    fn every_reading_carries_the_real_clocks_millisecond() {
        // A counter whose speed wobbles by 3% every 250 µs: each rate measurement spans about
        // two half-periods and agrees with the last, yet the rate is never the current one, so
        // readings err by up to 3% of RESYNC_NS, a few hundred nanoseconds.
        let mut f = Fake::new(3.0);
        let mut x = calibrated(&mut f);
        let (mut worst, mut real_reads, mut wrong_ms) = (0, 0, 0);
        for quarter in 0..800 {
            f.set_speed(if quarter % 2 == 0 { 3.09 } else { 3.0 });
            f.real_reads = 0;
            for _ in 0..(MS / 4 / 37) {
                f.true_ns += 37;
                let t = x.now(&mut f);
                worst = worst.max((t - f.real()).abs());
                wrong_ms += usize::from(t.div_euclid(MS) != f.real().div_euclid(MS));
            }
            real_reads += f.real_reads;
        }
        assert!(worst > (RESYNC_NS / 50) as i64, "the wobble does make readings err ({worst} ns)");
        assert_eq!(wrong_ms, 0, "but never by a millisecond boundary");
        // The guard reads the real clock on about 2% of calls, plus one re-anchor per RESYNC_NS.
        let calls = 800 * (MS / 4 / 37) as usize;
        assert!(real_reads < calls / 30, "{real_reads} real reads of {calls}");
    }

    #[test]
    fn abrupt_slews_within_the_kernels_bounds_never_change_the_millisecond() {
        // chrony's default maxslewrate (83,333 ppm) switched on, off and reversed; tick and
        // frequency at their extremes (±10.05%) flipped from one to the other, a change of 20.1%;
        // and the kernel's extremes (±22.6%, with the PLL's phase correction and adjtime()), a
        // change of 45.2%. Switches come after 1 µs to 4 ms, at any point of an interval;
        // readings come 1 to 60 ns apart.
        let chrony = 83_333e-6;
        let tick_and_frequency = 100_500e-6;
        let kernel = MAX_SLEW_PPM as f64 / 1e6;
        for (slews, ghz, seed) in [
            (&[chrony, 0.0, -chrony][..], 3.0, 1),
            (&[chrony, -chrony][..], 1.0, 2),
            (&[tick_and_frequency, -tick_and_frequency][..], 2.45, 3),
            (&[kernel, -kernel][..], 3.7, 4),
        ] {
            let mut f = Fake::new(ghz);
            let mut x = calibrated(&mut f);
            let mut rng = Lcg(seed);
            let (mut readings, mut extrapolated, mut wrong_ms, mut worst) = (0usize, 0usize, 0usize, 0i64);
            let (end, mut switch_at, mut next) = (f.true_ns + 150 * MS, f.true_ns, 0);
            while f.true_ns < end {
                let to = f.true_ns + rng.between(1, 60);
                if to >= switch_at {
                    f.true_ns = switch_at;
                    f.set_slew(slews[next % slews.len()]);
                    next += 1 + rng.between(0, 1) as usize;
                    // Mostly long runs, which the rate measurements catch up with, between
                    // bursts of short ones.
                    switch_at +=
                        if rng.between(0, 3) == 0 { rng.between(1_000, 60_000) } else { rng.between(1_000, 4 * MS) };
                }
                f.true_ns = to;
                f.real_reads = 0;
                let t = x.now(&mut f);
                let real = f.real();
                readings += 1;
                extrapolated += usize::from(f.real_reads == 0);
                wrong_ms += usize::from(t.div_euclid(MS) != real.div_euclid(MS));
                worst = worst.max((t - real).abs());
            }
            let case = format!("slews {slews:?} at {ghz} GHz");
            assert!(readings > 4_000_000, "{case}: {readings} readings");
            assert_eq!(wrong_ms, 0, "{case}: readings in the wrong millisecond (worst error {worst} ns)");
            assert!(worst < BOUNDARY_GUARD_NS, "{case}: off by {worst} ns");
            // The test means something: most readings were extrapolated, and the slews made them
            // err by nearly the most a resync interval allows, a rate measured at the slowest slew
            // used while the real clock runs at the fastest (7.0 µs for the kernel's extremes).
            let (lo, hi) = (slews.iter().copied().fold(1.0, f64::min), slews.iter().copied().fold(-1.0, f64::max));
            let reach = RESYNC_NS as f64 * (hi - lo) / (1.0 + lo);
            assert!(worst as f64 > 0.9 * reach, "{case}: off by only {worst} ns of {reach:.0}");
            assert!(extrapolated > readings / 2, "{case}: {extrapolated} of {readings} extrapolated");
        }
    }

    #[test]
    fn a_counter_that_changes_speed_is_measured_again() {
        let mut f = Fake::new(3.0);
        let mut x = calibrated(&mut f);
        f.set_speed(3.3);
        // 10% fast until the next rate measurement, at most MIN_CALIBRATION_NS + RESYNC_NS
        // away, but re-anchored every RESYNC_NS: at most RESYNC_NS / 10 off. That measurement
        // disagrees with the old rate, so the rate is dropped and measured again.
        let worst = run(&mut x, &mut f, 200_000, 25);
        assert!(
            worst > (RESYNC_NS / 20) as i64 && worst <= (RESYNC_NS / 10) as i64 + 100,
            "worst {worst} ns while re-learning"
        );
        assert!(run(&mut x, &mut f, 100_000, 25) <= 2);
    }

    #[test]
    fn the_rate_is_measured_again_over_a_long_interval_however_often_it_is_anchored() {
        // A slow drift, 0.02% every 500 µs: successive measurements agree, and each one follows
        // the counter, so readings stay within a few nanoseconds.
        let mut f = Fake::new(3.0);
        let mut x = calibrated(&mut f);
        let mut ghz = 3.0;
        for _ in 0..40 {
            ghz *= 1.0002;
            f.set_speed(ghz);
            let worst = run(&mut x, &mut f, 20_000, 25);
            assert!(worst <= 25, "{ghz} GHz: off by {worst} ns");
            assert!(x.extrapolating());
        }
        // 0.8% faster than the first measurement by now.
        assert!(ghz > 3.024);
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
