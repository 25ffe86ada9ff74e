//! The durable high-water mark: a reservation of time, kept in a small file in the data
//! directory, below which every id ever issued lies.
//!
//! Invariant: every id issued by this data directory, for any shard and for UUIDv7, carries a
//! time (the start of its tick) before `reserved_until`, and `reserved_until` is on disk before
//! any such id is handed out. So after a crash or restart, starting every generator at
//! `reserved_until` makes every new id greater than every id issued before, whatever the clock
//! says. If the clock then reads earlier than the reservation, the ordinary clock policy applies:
//! a short gap is waited out, a long one fails closed.
//!
//! The reservation runs [`RESERVE_AHEAD_MS`] ahead of the ids being issued and is renewed when
//! ids come within [`REFRESH_MARGIN_MS`] of it, so under steady load the file is written about
//! every quarter of a second, never once per id (and, on 15+, logged to the WAL after the file,
//! see `crate::runtime::wal`). Where synchronous standbys must flush a renewal before it is
//! published, both reach further by the time they take to answer ([`Reach`]), so that a renewal
//! is still ahead of the clock when it is published.

use serde::{Deserialize, Serialize};

use super::layout::Layout;

/// How far past the newest id a reservation reaches.
pub const RESERVE_AHEAD_MS: i64 = 500;
/// Ids this close to the reservation trigger a renewal (without waiting for it).
pub const REFRESH_MARGIN_MS: i64 = 250;
/// The file, relative to the data directory.
pub const FILE_NAME: &str = "snowflake_id.state";
/// The current file format.
pub const FORMAT: u32 = 1;
/// Every file written since 0.3.0 has two slots of this size, each a whole reservation: JSON with
/// a sequence number and a checksum, padded with spaces (one sector, the size PostgreSQL relies on
/// for `pg_control`'s data). A renewal overwrites the slot that does not hold the newest
/// reservation, in place, and calls fdatasync once. A write torn by a crash, or a copy (a base
/// backup) taken while a slot is written, leaves the other slot whole: the reservation before,
/// below which every id issued until the torn write completed lies.
pub const SLOT_BYTES: usize = 512;
/// See [`SLOT_BYTES`].
pub const FILE_BYTES: usize = 2 * SLOT_BYTES;
/// The largest file a start reads (a reservation takes about 200 bytes): anything larger is
/// damaged, and is not read into memory.
pub const MAX_FILE_BYTES: u64 = 4096;
/// A reservation this far ahead of the clock at start is worth a WARNING: the generators wait
/// for the clock or refuse until it gets there.
pub const FAR_AHEAD_WARNING_MS: i64 = 60_000;

/// Why the generators cannot continue from an existing reservation file. The server keeps
/// running; every generator refuses, each kind with its own SQLSTATE, until the file is usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Refusal {
    /// The file exists but cannot be read (permissions, I/O).
    Unreadable = 1,
    /// The file is empty, truncated, too large or not a reservation this version reads.
    Damaged = 2,
    /// The file was written under another layout or epoch.
    OtherLayout = 3,
}

impl Refusal {
    /// The refusal stored as `code` in shared memory (0 for none).
    pub const fn from_code(code: u32) -> Option<Refusal> {
        match code {
            1 => Some(Refusal::Unreadable),
            2 => Some(Refusal::Damaged),
            3 => Some(Refusal::OtherLayout),
            _ => None,
        }
    }
}

/// Both slots of a file of [`FILE_BYTES`], each a reservation and its sequence number, or why not.
fn slots(bytes: &[u8]) -> [Result<(Reservation, u64), String>; 2] {
    let (a, b) = bytes.split_at(SLOT_BYTES);
    [Reservation::from_document(a, true), Reservation::from_document(b, true)]
}

/// The slot holding the highest sequence number, if either is whole.
fn newest(slots: &[Result<(Reservation, u64), String>; 2]) -> Option<usize> {
    (0..2).filter(|&i| slots[i].is_ok()).max_by_key(|&i| slots[i].as_ref().map_or(0, |(_, seq)| *seq))
}

/// Where the next write into a file of [`FILE_BYTES`] goes: the slot that does not hold the newest
/// reservation, and the sequence number to give it. `None` when neither slot is whole, or the
/// sequence numbers ran out: the file is then written anew.
pub fn next_slot(bytes: &[u8]) -> Option<(usize, u64)> {
    let slots = slots(bytes);
    let i = newest(&slots)?;
    let seq = slots[i].as_ref().ok()?.1.checked_add(1)?;
    Some((1 - i, seq))
}

/// What a start makes of the file's bytes: the reservation to continue from, or why not.
///
/// # Errors
/// [`Refusal::Damaged`] or [`Refusal::OtherLayout`], with a message for the log.
pub fn judge(bytes: &[u8], layout: &Layout) -> Result<Reservation, (Refusal, String)> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err((Refusal::Damaged, format!("it is larger than {MAX_FILE_BYTES} bytes")));
    }
    let r = Reservation::from_bytes(bytes).map_err(|why| (Refusal::Damaged, why))?;
    if r.reserved_until_unix_ms < 0 || r.written_at_unix_ms < 0 {
        return Err((Refusal::Damaged, "it holds a time before 1970".to_owned()));
    }
    r.check_layout(layout).map_err(|why| (Refusal::OtherLayout, why))?;
    Ok(r)
}

/// One document of the file: a reservation and, in a slot since 0.3.0, its sequence number and
/// checksum.
#[derive(Serialize, Deserialize)]
struct OnDisk {
    #[serde(flatten)]
    reservation: Reservation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sequence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checksum: Option<String>,
}

/// The file's contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub format: u32,
    /// No id issued from this data directory carries a time at or after this Unix millisecond.
    pub reserved_until_unix_ms: i64,
    /// The layout and epoch the ids were issued with: a restart with others is refused.
    pub layout: String,
    pub epoch_unix_ms: i64,
    /// When the file was written, for operators.
    pub written_at_unix_ms: i64,
}

impl Reservation {
    pub fn new(layout: &Layout, reserved_until_unix_ms: i64, now_unix_ms: i64) -> Self {
        Reservation {
            format: FORMAT,
            reserved_until_unix_ms,
            layout: layout.widths().to_string(),
            epoch_unix_ms: layout.epoch_unix_ms(),
            written_at_unix_ms: now_unix_ms,
        }
    }

    /// A new file: both slots hold this reservation (sequence numbers 1 and 0).
    pub fn to_file(&self) -> Vec<u8> {
        [self.to_slot(1), self.to_slot(0)].concat()
    }

    /// One slot, exactly [`SLOT_BYTES`]: the JSON, spaces, and a newline.
    pub fn to_slot(&self, sequence: u64) -> Vec<u8> {
        let on_disk =
            OnDisk { reservation: self.clone(), sequence: Some(sequence), checksum: Some(self.checksum(sequence)) };
        let mut v = serde_json::to_vec_pretty(&on_disk).expect("a plain struct always serialises");
        assert!(v.len() < SLOT_BYTES, "a reservation takes about 250 bytes");
        v.resize(SLOT_BYTES - 1, b' ');
        v.push(b'\n');
        v
    }

    /// The file's reservation: the newest whole slot of a file of [`FILE_BYTES`], or the one
    /// document of a file written before 0.3.0.
    ///
    /// # Errors
    /// A message when the bytes hold no reservation this version understands.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() != FILE_BYTES {
            return Self::from_document(bytes, false).map(|(r, _)| r);
        }
        let slots = slots(bytes);
        match newest(&slots) {
            Some(i) => slots[i].clone().map(|(r, _)| r),
            None => Err(slots[0].clone().unwrap_err()),
        }
    }

    /// One JSON document; a slot's must carry its sequence number and checksum.
    fn from_document(bytes: &[u8], slot: bool) -> Result<(Self, u64), String> {
        let OnDisk { reservation: r, sequence, checksum } =
            serde_json::from_slice(bytes).map_err(|e| format!("it is not valid: {e}"))?;
        if r.format != FORMAT {
            return Err(format!("it has format {}, and this version reads format {FORMAT}", r.format));
        }
        match (sequence, checksum) {
            (Some(_), _) if !slot => Err(format!("it is cut short ({} bytes)", bytes.len())),
            (Some(seq), Some(sum)) if sum == r.checksum(seq) => Ok((r, seq)),
            (Some(_), Some(_)) => Err("its checksum does not match its contents: a write was torn".to_owned()),
            // Files written before 0.3.0: one document, never overwritten in place.
            (None, None) if !slot => Ok((r, 0)),
            _ => Err("it lacks a sequence number or a checksum".to_owned()),
        }
    }

    /// FNV-1a over the compact JSON of the fields and the sequence number, in hex. Not a defence
    /// against anyone who can write the file: it tells a slot torn by a crash (the start of a new
    /// slot over the end of the old one, which can parse as a lower reservation) from a whole one.
    fn checksum(&self, sequence: u64) -> String {
        let mut bytes = serde_json::to_vec(self).expect("a plain struct always serialises");
        bytes.extend_from_slice(sequence.to_string().as_bytes());
        let hash =
            bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        format!("{hash:016x}")
    }

    /// Refuses to continue an id space under a different layout or epoch: the same bits would
    /// mean other things, and new ids could repeat old ones.
    ///
    /// # Errors
    /// A message naming what changed.
    pub fn check_layout(&self, layout: &Layout) -> Result<(), String> {
        let now = layout.widths().to_string();
        if self.layout != now || self.epoch_unix_ms != layout.epoch_unix_ms() {
            return Err(format!(
                "ids in this data directory were issued with layout {} and epoch {}, but the server now has layout {} \
                    and epoch {}",
                self.layout,
                super::time::format_unix_ms(self.epoch_unix_ms),
                now,
                super::time::format_unix_ms(layout.epoch_unix_ms())
            ));
        }
        Ok(())
    }
}

/// How far a renewal reaches past the word and the clock, and how close ids may come to the
/// reservation before it is renewed.
///
/// A renewal that synchronous standbys must flush first is published only once they answer, `lag`
/// later: reaching only [`RESERVE_AHEAD_MS`] ahead, it would already lie in the past once the lag
/// passes that, and no id could be issued under it at all. So a renewal starts the lag earlier
/// (the margin is [`REFRESH_MARGIN_MS`] plus the lag), and reaches twice the lag further
/// ([`RESERVE_AHEAD_MS`] plus twice the lag): under a steady lag, the reservation in force still
/// covers the clock, by [`REFRESH_MARGIN_MS`], when the standbys answer, so no call waits; and
/// renewals come every [`REFRESH_MARGIN_MS`] plus the lag, so that below the cap at most one is
/// on its way at a time (at the cap, renewals come [`REFRESH_MARGIN_MS`] apart and two may
/// travel). A reservation never reaches more than `cap_ms` past the word, or the clock if that is
/// later (nor less than [`RESERVE_AHEAD_MS`]); a word minted ahead of the clock under the lead
/// adds that lead. The generators a restart starts at it wait for the clock; a lag too long for
/// the cap makes calls wait, as commits do, but never stops them while the standbys answer
/// within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    /// How far past the word (or the clock, if later) a renewal reaches.
    pub ahead_ms: i64,
    /// Ids this close to the reservation renew it.
    pub margin_ms: i64,
}

impl Reach {
    /// Without synchronous standbys (or with ones that answer at once).
    pub const PLAIN: Reach = Reach { ahead_ms: RESERVE_AHEAD_MS, margin_ms: REFRESH_MARGIN_MS };

    /// The reach for standbys that answer `lag_ms` after a renewal is written, under a cap of
    /// `cap_ms` ahead of the clock (see [`Reach`] and [`reach_cap_ms`]).
    pub fn with_lag(lag_ms: i64, cap_ms: i64) -> Reach {
        let lag = lag_ms.clamp(0, cap_ms.max(0));
        let ahead = lag
            .saturating_mul(2)
            .saturating_add(RESERVE_AHEAD_MS)
            .clamp(RESERVE_AHEAD_MS, cap_ms.max(RESERVE_AHEAD_MS));
        // Always short of the reach, so that a renewal is not due again as soon as it is made.
        let margin = lag.saturating_add(REFRESH_MARGIN_MS).min(ahead - (RESERVE_AHEAD_MS - REFRESH_MARGIN_MS));
        Reach { ahead_ms: ahead, margin_ms: margin }
    }
}

/// How far ahead of the clock a reservation may reach: as far as a call waits for a clock that
/// stepped back (`snowflake_id.max_rewind_wait`), and at least [`RESERVE_AHEAD_MS`]. A restart
/// starts every generator at the reservation; the calls then wait for the clock to get there,
/// which a wait that long covers (`crate::core::monotonic::catch_up_budget_ns`).
pub fn reach_cap_ms(max_wait_ms: u32) -> i64 {
    i64::from(max_wait_ms).max(RESERVE_AHEAD_MS)
}

/// The reservation to write so that a word starting at `word_unix_ms` may be issued: `ahead_ms`
/// ahead of that word and of the clock ([`Reach::ahead_ms`]), and never behind the current one.
pub fn renewal_target(current: i64, word_unix_ms: i64, now_unix_ms: i64, ahead_ms: i64) -> i64 {
    current.max(word_unix_ms.max(now_unix_ms).saturating_add(ahead_ms))
}

/// Whether an id starting at `word_unix_ms` is close enough to the reservation to renew it now,
/// before anyone has to wait for it ([`Reach::margin_ms`]).
pub fn due_for_renewal(current: i64, word_unix_ms: i64, margin_ms: i64) -> bool {
    word_unix_ms.saturating_add(margin_ms) >= current
}

/// The standbys' lag after one more renewal was published: `sample_ms` is how long after its
/// writing a backend last saw it not yet flushed (a lower bound of the lag, close to it when calls
/// look often, as they do under load and while a call waits). A longer lag counts at once, since
/// a reach too short makes calls wait; a shorter one moves the estimate a quarter of the way down
/// per renewal, so that one quick answer between slow ones does not shorten the reach.
pub fn next_lag(lag_ms: i64, sample_ms: i64) -> i64 {
    let (lag, sample) = (lag_ms.max(0), sample_ms.max(0));
    if sample >= lag {
        sample
    } else {
        lag - (lag - sample + 3) / 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::layout::{Widths, DEFAULT_EPOCH_UNIX_MS};

    #[test]
    fn round_trips_through_json() {
        let r = Reservation::new(&Layout::DEFAULT, 1_800_000_000_500, 1_800_000_000_000);
        let text = String::from_utf8(r.to_file()).unwrap();
        assert!(text.contains("\"reserved_until_unix_ms\": 1800000000500"), "{text}");
        assert!(text.contains("\"layout\": \"41/13/9\""), "{text}");
        assert_eq!(Reservation::from_bytes(text.as_bytes()), Ok(r));
    }

    #[test]
    fn every_file_has_the_same_size() {
        let mut widest = Reservation::new(&Layout::DEFAULT, i64::MIN, i64::MIN);
        widest.layout = "63/63/63".to_owned();
        widest.epoch_unix_ms = i64::MIN;
        for r in [Reservation::new(&Layout::DEFAULT, 0, 0), widest] {
            assert_eq!(r.to_slot(u64::MAX).len(), SLOT_BYTES);
            assert_eq!(r.to_file().len(), FILE_BYTES);
            assert_eq!(Reservation::from_bytes(&r.to_file()), Ok(r));
        }
    }

    /// Renewals alternate between the slots, and a start reads the newest.
    #[test]
    fn renewals_alternate_between_the_slots() {
        let at = |ms| Reservation::new(&Layout::DEFAULT, ms, ms - 500);
        let mut file = at(1_000).to_file();
        for (n, ms) in (2_000..2_010).enumerate() {
            let (slot, seq) = next_slot(&file).unwrap();
            assert_eq!((slot, seq), ((n + 1) % 2, n as u64 + 2));
            file[slot * SLOT_BYTES..][..SLOT_BYTES].copy_from_slice(&at(ms).to_slot(seq));
            assert_eq!(Reservation::from_bytes(&file), Ok(at(ms)));
        }
        // Sequence numbers that ran out, or no whole slot: the file is written anew.
        assert_eq!(next_slot(&[at(1).to_slot(u64::MAX), at(1).to_slot(0)].concat()), None);
        assert_eq!(next_slot(&[0u8; FILE_BYTES]), None);
        // A file from before 0.3.0 (one document, no checksum) is still read.
        let old = serde_json::to_vec_pretty(&at(3_000)).unwrap();
        assert_eq!(Reservation::from_bytes(&old), Ok(at(3_000)));
    }

    /// A slot torn anywhere (the new slot's start over the old one's end, by a crash or a copy
    /// taken while it is written) leaves the other slot whole: the file reads as the reservation
    /// before, never lower, including when the number of digits changes.
    #[test]
    fn a_torn_slot_leaves_the_reservation_before() {
        // Without the checksum, a tear where the number of digits changes reads as a lower one.
        let mut lower_unchecked = 0;
        for (before, old, new) in [
            (1_800_000_000_000, 1_800_000_000_500, 1_800_000_001_100),
            (9_999_999_999_000, 9_999_999_999_700, 10_000_000_000_300),
        ] {
            let at = |ms| Reservation::new(&Layout::DEFAULT, ms, ms - 500);
            // Slot 0 holds `before` (sequence 2), slot 1 `old` (3); `new` goes into slot 0.
            let mut file = [at(before).to_slot(2), at(old).to_slot(3)].concat();
            assert_eq!(next_slot(&file), Some((0, 4)));
            let slot = at(new).to_slot(4);
            // Sectors of a torn write may reach the disk in any order: the new slot's start over
            // the old one's end, or its end over the old one's start.
            for (k, tail) in (0..=SLOT_BYTES).flat_map(|k| [(k, false), (k, true)]) {
                if tail {
                    file[k..SLOT_BYTES].copy_from_slice(&slot[k..]);
                } else {
                    file[..k].copy_from_slice(&slot[..k]);
                }
                let r = judge(&file, &Layout::DEFAULT).expect("one slot is always whole");
                // The old one, or the new one once its checksum says it reads whole.
                assert!([old, new].contains(&r.reserved_until_unix_ms), "torn at {k}: {r:?}");
                if (!tail && k < SLOT_BYTES / 4) || (tail && k > SLOT_BYTES / 2) {
                    assert_eq!(r.reserved_until_unix_ms, old, "torn at {k}");
                }
                let torn = [&slot[..k], &at(before).to_slot(2)[k..]].concat();
                let unchecked = serde_json::from_slice::<Reservation>(&torn).ok();
                lower_unchecked += usize::from(unchecked.is_some_and(|r| r.reserved_until_unix_ms < before));
                file[..SLOT_BYTES].copy_from_slice(&at(before).to_slot(2));
            }
        }
        assert!(lower_unchecked > 0);
    }

    #[test]
    fn refuses_other_formats_and_garbage() {
        assert!(Reservation::from_bytes(b"").is_err());
        assert!(Reservation::from_bytes(b"{\"format\": 1}").is_err());
        let mut r = Reservation::new(&Layout::DEFAULT, 1, 1);
        r.format = 2;
        assert!(Reservation::from_bytes(&r.to_file()).unwrap_err().contains("format 2"));
        // Both slots torn or damaged: refused.
        let mut file = Reservation::new(&Layout::DEFAULT, 1, 1).to_file();
        file[10] = b'9';
        file[SLOT_BYTES + 10] = b'9';
        assert!(Reservation::from_bytes(&file).is_err());
    }

    #[test]
    fn a_changed_layout_or_epoch_is_refused() {
        let r = Reservation::new(&Layout::DEFAULT, 1, 1);
        assert_eq!(r.check_layout(&Layout::DEFAULT), Ok(()));
        let twitter = Layout::new(Widths::TWITTER, DEFAULT_EPOCH_UNIX_MS).unwrap();
        assert!(r.check_layout(&twitter).unwrap_err().contains("layout 41/13/9"));
        let later = Layout::new(Widths::DEFAULT, DEFAULT_EPOCH_UNIX_MS + 1).unwrap();
        assert!(r.check_layout(&later).is_err());
    }

    #[test]
    fn a_start_judges_the_file_by_kind() {
        let ok = Reservation::new(&Layout::DEFAULT, 1_800_000_000_500, 1_800_000_000_000);
        assert_eq!(judge(&ok.to_file(), &Layout::DEFAULT), Ok(ok.clone()));
        let bytes = ok.to_file();
        for damaged in [&b""[..], &bytes[..bytes.trim_ascii_end().len() / 2], &b"\0\0\0\0"[..], &[b' '; 5000][..]] {
            assert_eq!(judge(damaged, &Layout::DEFAULT).unwrap_err().0, Refusal::Damaged);
        }
        let twitter = Layout::new(Widths::TWITTER, DEFAULT_EPOCH_UNIX_MS).unwrap();
        assert_eq!(judge(&bytes, &twitter).unwrap_err().0, Refusal::OtherLayout);
        let before_1970 = Reservation::new(&Layout::DEFAULT, i64::MIN, 1);
        assert_eq!(judge(&before_1970.to_file(), &Layout::DEFAULT).unwrap_err().0, Refusal::Damaged);
        for r in [Refusal::Unreadable, Refusal::Damaged, Refusal::OtherLayout] {
            assert_eq!(Refusal::from_code(r as u32), Some(r));
        }
        assert_eq!(Refusal::from_code(0), None);
    }

    #[test]
    fn renewal_reaches_past_the_word_and_the_clock() {
        let ahead = Reach::PLAIN.ahead_ms;
        assert_eq!(renewal_target(0, 1000, 900, ahead), 1500);
        assert_eq!(renewal_target(0, 900, 1000, ahead), 1500, "a clock ahead of the ids");
        assert_eq!(renewal_target(5000, 1000, 1000, ahead), 5000, "never moves back");
        assert!(!due_for_renewal(1500, 1249, Reach::PLAIN.margin_ms));
        assert!(due_for_renewal(1500, 1250, Reach::PLAIN.margin_ms));
    }

    #[test]
    fn the_reach_grows_by_the_standbys_lag_up_to_the_cap() {
        let cap = reach_cap_ms(1000);
        assert_eq!(Reach::with_lag(0, cap), Reach::PLAIN);
        assert_eq!(Reach::with_lag(-5, cap), Reach::PLAIN, "a clock step back is no negative lag");
        assert_eq!(Reach::with_lag(200, cap), Reach { ahead_ms: 900, margin_ms: 450 });
        assert_eq!(Reach::with_lag(700, cap), Reach { ahead_ms: 1000, margin_ms: 750 }, "capped at max_rewind_wait");
        assert_eq!(Reach::with_lag(700, reach_cap_ms(3000)), Reach { ahead_ms: 1900, margin_ms: 950 });
        assert_eq!(Reach::with_lag(1500, reach_cap_ms(3000)), Reach { ahead_ms: 3000, margin_ms: 1750 });
        assert_eq!(reach_cap_ms(0), RESERVE_AHEAD_MS, "never below the plain reach");
        assert_eq!(Reach::with_lag(i64::MAX, reach_cap_ms(0)), Reach::PLAIN);
        assert_eq!(Reach::with_lag(i64::MAX, i64::MAX).margin_ms, i64::MAX - 250, "no overflow");
    }

    #[test]
    fn the_lag_rises_at_once_and_falls_by_quarters() {
        assert_eq!(next_lag(0, 700), 700);
        assert_eq!(next_lag(700, 900), 900);
        assert_eq!(next_lag(800, 0), 600);
        assert_eq!(next_lag(3, 0), 2, "falls to nothing in the end");
        let mut lag = 1000;
        for _ in 0..40 {
            lag = next_lag(lag, 0);
        }
        assert_eq!(lag, 0);
    }

    proptest::proptest! {
        /// Under a steady lag the estimate reaches, renewals made at the margin keep the clock
        /// covered while the standbys take their time (no call waits), and come far enough apart
        /// that at most one is on its way at a time; as long as the cap allows the reach. A
        /// renewal never reaches further past the clock than the cap (or the current reservation),
        /// and is never due again as soon as it is made.
        #[test]
        fn a_steady_lag_never_makes_a_call_wait(
            lag in 0i64..5_000, max_wait in 0u32..10_000, now in 0i64..1_000_000, base in -2_000i64..2_000
        ) {
            let cap = reach_cap_ms(max_wait);
            let reach = Reach::with_lag(lag, cap);
            let current = now + base;
            let target = renewal_target(current, now, now, reach.ahead_ms);
            proptest::prop_assert!(target - now <= cap.max(base), "no further ahead than the cap or the current one");
            proptest::prop_assert!(target >= current);
            proptest::prop_assert!(reach.margin_ms < reach.ahead_ms && reach.margin_ms >= REFRESH_MARGIN_MS);
            let fresh = renewal_target(i64::MIN, now, now, reach.ahead_ms);
            proptest::prop_assert!(!due_for_renewal(fresh, now, reach.margin_ms));
            if RESERVE_AHEAD_MS + 2 * lag <= cap {
                // Made when ids reach the margin (a reservation `margin` ahead), answered `lag`
                // later: the clock is still below the reservation in force then, by the plain margin.
                proptest::prop_assert_eq!(reach.margin_ms - lag, REFRESH_MARGIN_MS);
                // The next is due `ahead - margin` after it was made: not before it is answered.
                proptest::prop_assert!(reach.ahead_ms - reach.margin_ms >= lag);
            }
            // The estimate never falls below a sample, nor rises above the larger of both.
            let next = next_lag(lag, base.abs());
            proptest::prop_assert!(next >= base.abs() && next <= lag.max(base.abs()));
        }
    }
}
