//! The id space a database was minted in, and the floor it carries for the ids it may hold.
//!
//! A database carries a record of the layout and epoch its snowflake ids were made under (the
//! extension's `snowflake_id_space` table, dumped with the data and kept by `pg_upgrade`). A
//! server with another layout or epoch would mint ids from another space into the same tables:
//! smaller than the stored ones, or colliding with them. [`judge`] compares the record with the
//! server's layout.
//!
//! Each row also carries `minted_before`: a time before which every id the extension minted
//! while connected to that database lies. The extension writes it itself, never a role: it is
//! the server's durable reservation, written in place before an id past the old value is handed
//! out. So it travels with a dump and through `pg_upgrade` the way a sequence's value does, and a
//! server that receives the database waits for it ([`wait_target`]) before the first id it mints
//! there, whatever its clock says. Nothing a role stores in its own tables moves any generator.

use std::fmt;

use super::layout::{Layout, Widths};
use super::monotonic::{catch_up_budget_ns, ClockPolicy};
use super::time::{self, NS_PER_MS};

/// How far ahead of the clock a recorded floor may lie and still be waited for: as far as
/// a call may wait for the clock to catch up with a generator that runs ahead
/// ([`catch_up_budget_ns`], 2 s with the default settings), less [`HORIZON_HEADROOM_MS`], so
/// that the first call after a wait to the horizon waits within its budget however its sleeps
/// overrun. A floor further ahead (a restore onto a server whose clock is behind, a value a
/// superuser wrote by hand) is not waited for: the database's ids refuse until the clock is
/// within the horizon of it, since ids minted below it could repeat ids the database holds.
pub fn horizon_ms(policy: &ClockPolicy) -> i64 {
    i64::try_from(catch_up_budget_ns(policy) / NS_PER_MS as u64).map_or(i64::MAX, |b| b - HORIZON_HEADROOM_MS)
}

/// See [`horizon_ms`].
pub const HORIZON_HEADROOM_MS: i64 = 250;

/// What one row says about the ids minted in its database (`minted_before`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MintedBefore {
    /// `-infinity`: none yet (a row written by hand, or by `CREATE EXTENSION` before 0.4.0).
    Nothing,
    /// Every id lies before this Unix millisecond.
    At(i64),
    /// `infinity`: not known (the row `CREATE EXTENSION` writes, until the first id writes a
    /// floor; a row restored from a release before the floor, or a record without the column).
    /// Any id may be stored, as far ahead as the horizon.
    Unknown,
}

/// One row of the record: a layout's canonical text, its epoch, and its floor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub layout: String,
    pub epoch_unix_ms: i64,
    pub minted_before: MintedBefore,
}

/// The database's floor, over all its rows: the latest floor a row knows, and whether some row's
/// is unknown. Both count: a restore adds the dumped rows (with their floor) beside the row
/// `CREATE EXTENSION` wrote (unknown), and the dumped floor may lie past the horizon an unknown
/// one is waited to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Floor {
    /// The latest Unix millisecond a row says every id lies before, if a row says one.
    pub latest: Option<i64>,
    /// Some row's floor is unknown: ids may lie as far ahead as the horizon.
    pub unknown: bool,
}

/// See [`Floor`].
pub fn floor(recorded: &[Recorded]) -> Floor {
    recorded.iter().fold(Floor { latest: None, unknown: false }, |acc, r| match r.minted_before {
        MintedBefore::Nothing => acc,
        MintedBefore::At(at) => Floor { latest: Some(acc.latest.map_or(at, |l| l.max(at))), ..acc },
        MintedBefore::Unknown => Floor { unknown: true, ..acc },
    })
}

/// What the first id in a database whose floor is `floor` waits for, with the clock at
/// `now_unix_ms`: the floor, or for an unknown one the horizon (every stored id a call could wait
/// for lies below it); never past the horizon. `None` when nothing was minted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorWait {
    None,
    /// Wait until this Unix millisecond.
    To(i64),
    /// The floor lies past the horizon: no call may wait that long, and no id may be minted
    /// below it (it could repeat one the database holds), so the call refuses.
    Beyond {
        floor: i64,
    },
}

/// See [`FloorWait`]. A known floor past the horizon is refused even where another row's is
/// unknown: waiting to the horizon would mint below it.
pub fn wait_target(floor: Floor, now_unix_ms: i64, horizon_ms: i64) -> FloorWait {
    let horizon = now_unix_ms.saturating_add(horizon_ms);
    match floor {
        Floor { latest: Some(f), .. } if f > horizon => FloorWait::Beyond { floor: f },
        Floor { unknown: true, .. } => FloorWait::To(horizon),
        Floor { latest: Some(f), .. } => FloorWait::To(f),
        Floor { latest: None, unknown: false } => FloorWait::None,
    }
}

/// The record names an id space other than the server's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub recorded: Recorded,
    pub server_layout: String,
    pub server_epoch_unix_ms: i64,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "this database's snowflake ids were minted with snowflake_id.layout = '{}' and snowflake_id.epoch = '{}', \
                but this server runs with snowflake_id.layout = '{}' and snowflake_id.epoch = '{}'",
            self.recorded.layout,
            time::format_unix_ms(self.recorded.epoch_unix_ms),
            self.server_layout,
            time::format_unix_ms(self.server_epoch_unix_ms),
        )
    }
}

/// Whether every recorded row names the server's id space. A layout is compared by its widths
/// and tick (so `default` and `41/13/9` are the same space), the epoch to the millisecond. An
/// empty record (a database from before the record existed) names no space and passes. A
/// recorded layout that no longer parses is a mismatch: nothing says its ids fit the server's.
///
/// # Errors
/// The first row that differs.
pub fn judge(recorded: &[Recorded], server: &Layout) -> Result<(), Mismatch> {
    let same = |r: &Recorded| {
        Widths::parse(&r.layout).is_ok_and(|w| w == server.widths()) && r.epoch_unix_ms == server.epoch_unix_ms()
    };
    match recorded.iter().find(|r| !same(r)) {
        None => Ok(()),
        Some(r) => Err(Mismatch {
            recorded: r.clone(),
            server_layout: server.widths().to_string(),
            server_epoch_unix_ms: server.epoch_unix_ms(),
        }),
    }
}

/// One row of a record as its fingerprint sees it: layout, epoch (Unix ms), record time (Unix
/// µs) and the transaction that wrote the row version (its raw xmin).
pub type Identity = (String, i64, i64, u32);

/// The fingerprint of a database's record: 64-bit FNV-1a over the database's oid, then its rows'
/// layouts (each after its length), epochs, record times and row versions, in order; not their
/// floors, which the extension advances itself in place (so its own writes keep the fingerprint,
/// and every other write changes it). A server's registry entry that matches it is taken as proof
/// that the database was waited for since the start, so it is wide, and holds the database.
/// Never zero, which marks a free registry entry.
pub fn fingerprint(database: u32, mut identities: Vec<Identity>) -> u64 {
    identities.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut add = |bytes: &[u8]| {
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    add(&database.to_le_bytes());
    for (layout, epoch, at, xmin) in &identities {
        add(&u64::try_from(layout.len()).unwrap_or(u64::MAX).to_le_bytes());
        add(layout.as_bytes());
        add(&epoch.to_le_bytes());
        add(&at.to_le_bytes());
        add(&xmin.to_le_bytes());
    }
    hash.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::layout::DEFAULT_EPOCH_UNIX_MS;

    fn rec(layout: &str, epoch: i64) -> Recorded {
        Recorded { layout: layout.to_owned(), epoch_unix_ms: epoch, minted_before: MintedBefore::Nothing }
    }

    #[test]
    fn the_same_space_passes_whatever_the_spelling() {
        let l = Layout::DEFAULT;
        assert_eq!(judge(&[], &l), Ok(()));
        assert_eq!(judge(&[rec("41/13/9", DEFAULT_EPOCH_UNIX_MS), rec("default", DEFAULT_EPOCH_UNIX_MS)], &l), Ok(()));
    }

    #[test]
    fn another_epoch_or_layout_is_a_mismatch_naming_both() {
        let l = Layout::DEFAULT;
        let e2020 = 1_577_836_800_000;
        let m = judge(&[rec("41/13/9", DEFAULT_EPOCH_UNIX_MS), rec("41/13/9", e2020)], &l).unwrap_err();
        assert_eq!(m.recorded.epoch_unix_ms, e2020);
        let text = m.to_string();
        assert!(text.contains("snowflake_id.layout = '41/13/9'") && text.contains("2020-01-01"), "{text}");
        assert!(judge(&[rec("twitter", DEFAULT_EPOCH_UNIX_MS)], &l).is_err());
        assert!(judge(&[rec("41/13/9@2ms", DEFAULT_EPOCH_UNIX_MS)], &l).is_err());
        assert!(judge(&[rec("garbage", DEFAULT_EPOCH_UNIX_MS)], &l).is_err(), "an unreadable record is no proof");
    }

    #[test]
    fn the_floor_is_the_latest_row_and_whether_one_is_unknown() {
        let row = |m| Recorded { minted_before: m, ..rec("default", DEFAULT_EPOCH_UNIX_MS) };
        let nothing = Floor { latest: None, unknown: false };
        assert_eq!(floor(&[]), nothing);
        assert_eq!(floor(&[row(MintedBefore::Nothing)]), nothing);
        assert_eq!(
            floor(&[row(MintedBefore::At(5)), row(MintedBefore::Nothing), row(MintedBefore::At(9))]),
            Floor { latest: Some(9), unknown: false }
        );
        // A restore: the dumped row's floor beside the unknown one CREATE EXTENSION wrote.
        assert_eq!(
            floor(&[row(MintedBefore::Unknown), row(MintedBefore::At(5))]),
            Floor { latest: Some(5), unknown: true }
        );
    }

    #[test]
    fn a_floor_is_waited_for_up_to_the_horizon_and_refused_beyond() {
        let h = horizon_ms(&ClockPolicy { max_lead_ms: 5, max_wait_ms: 1000 });
        assert_eq!(h, 1750, "the default settings wait up to 2 s for a generator ahead, less the headroom");
        assert_eq!(horizon_ms(&ClockPolicy { max_lead_ms: 5, max_wait_ms: 15_000 }), 15_750);
        let now = 1_780_000_000_000;
        let known = |f| Floor { latest: Some(f), unknown: false };
        let unknown_and = |f| Floor { latest: Some(f), unknown: true };
        assert_eq!(wait_target(Floor { latest: None, unknown: false }, now, h), FloorWait::None);
        assert_eq!(wait_target(known(now - 60_000), now, h), FloorWait::To(now - 60_000));
        assert_eq!(wait_target(known(now + 1500), now, h), FloorWait::To(now + 1500));
        assert_eq!(wait_target(known(now + 86_400_000), now, h), FloorWait::Beyond { floor: now + 86_400_000 });
        assert_eq!(wait_target(known(now + h), now, h), FloorWait::To(now + h));
        assert_eq!(wait_target(known(now + h + 1), now, h), FloorWait::Beyond { floor: now + h + 1 });
        assert_eq!(wait_target(Floor { latest: None, unknown: true }, now, h), FloorWait::To(now + h));
        // A restored floor past the horizon beside an unknown one is refused, not waited to the
        // horizon and minted below; one below the horizon waits to the horizon.
        assert_eq!(wait_target(unknown_and(now + 4900), now, h), FloorWait::Beyond { floor: now + 4900 });
        assert_eq!(wait_target(unknown_and(now + 1000), now, h), FloorWait::To(now + h));
    }

    #[test]
    fn a_fingerprint_tells_databases_rows_and_row_versions_apart() {
        let row = |layout: &str, xmin| (layout.to_owned(), 1_735_689_600_000, 1_800_000_000_000_000, xmin);
        let fp = |db, rows: &[Identity]| fingerprint(db, rows.to_vec());
        let one = [row("41/13/9", 7)];
        assert_eq!(fp(5, &one), fp(5, &one));
        assert_ne!(fp(5, &one), fp(6, &one), "the same record in another database");
        assert_ne!(fp(5, &one), fp(5, &[row("41/13/9", 8)]), "a row version written again");
        assert_ne!(fp(5, &one), fp(5, &[]), "no record");
        assert_ne!(fp(5, &[]), fp(6, &[]));
        let two = [row("41/13/9", 7), row("41/12/10", 9)];
        assert_eq!(fp(5, &two), fp(5, &[two[1].clone(), two[0].clone()]), "rows in another order");
        assert!((0..1000).all(|db| fp(db, &one) != 0));
    }
}
