//! The fleet check's rules: what one server says about itself ([`ServerInfo`]), how a peer's
//! clock offset is measured from timed round trips ([`clock_offset`]), and the findings about a
//! set of servers ([`judge`]). The SQL function and the connections are `crate::fleet`.
//!
//! Snowflake ids need no coordination to be minted, but they need one fact to hold across the
//! fleet: no two servers mint for the same shard. Assigning shards is itself a coordination
//! problem, done off the hot path, in configuration. This module checks it after the fact, as
//! well as a database extension can:
//! - **configured shards** (`snowflake_id.shards`) that overlap between two primaries, or a server
//!   that was never told what it owns (`*`);
//! - **minted shards** (those with ids since each server started) that overlap: duplicates are
//!   then possible, not just configured;
//! - **clones**: two primaries with the same system identifier, a copy (`pg_basebackup`, a
//!   restored backup, a snapshot) started as a second primary with its original's settings;
//! - **layout or epoch** different from this server's: the same bits would mean other things;
//! - **clock skew** against each peer beyond a threshold, measured like NTP: the peer's clock
//!   read between two local readings, so the offset is known to within half the round trip;
//! - **a reservation far ahead of the clock**, which makes the generators refuse after a restart.
//!
//! What it cannot see: servers not in the list, a shard minted before the last restart of the
//! server that minted it, clock skew that comes and goes between checks, and a standby promoted
//! while its old primary still runs unreachable to the check.

use serde::{Deserialize, Serialize};

use super::reservation::FAR_AHEAD_WARNING_MS;
use super::shards::ShardSet;

/// What a server says about itself (`snowflake_fleet_info()`), as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// `pg_control_system().system_identifier`, as text (JSON numbers past 2^53 are not safe).
    pub system_identifier: String,
    pub timeline: u32,
    pub in_recovery: bool,
    /// The layout's widths and tick (`41/13/9@1ms`) and the epoch.
    pub layout: String,
    pub epoch_unix_ms: i64,
    /// `snowflake_id.shards` as configured.
    pub shards: String,
    /// The shards that minted ids since the server started (or its statistics were reset).
    pub minted: String,
    pub reserved_until_unix_ms: i64,
    /// The server's clock when it answered.
    pub clock_unix_us: i64,
    /// The extension library's version.
    pub version: String,
}

/// One timed reading of a peer's clock: local readings before and after, the peer's between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub sent_us: i64,
    pub peer_us: i64,
    pub received_us: i64,
}

/// The peer's clock minus ours, and the bound on the error, from the sample with the shortest
/// round trip: the peer read its clock at some instant between `sent` and `received`, so the
/// offset from the midpoint errs by at most half the round trip (NTP's reasoning, without its
/// assumption of symmetric paths, which only narrows the bound).
pub fn clock_offset(samples: &[Sample]) -> Option<(i64, i64)> {
    let best = samples.iter().filter(|s| s.received_us >= s.sent_us).min_by_key(|s| s.received_us - s.sent_us)?;
    let half = (best.received_us - best.sent_us).div_euclid(2);
    let mid = best.sent_us + half;
    Some((best.peer_us - mid, half + (best.received_us - best.sent_us) % 2))
}

/// What became of one server of the check.
#[derive(Clone, Debug)]
pub enum Reached {
    /// Its facts, and for a peer its clock offset and error bound (µs); `None` for this server.
    Yes(ServerInfo, Option<(i64, i64)>),
    /// It could not be reached or asked: why.
    No(String),
    /// It was reached, but has no usable snowflake_id: why.
    NoExtension(String),
}

/// One row of the check's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// The server's position in the list (0 is this server).
    pub server: usize,
    pub check: &'static str,
    pub ok: bool,
    pub detail: String,
    /// The figures behind it, for monitoring.
    pub figures: serde_json::Value,
}

/// The thresholds of the check.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest clock offset (plus its error bound) accepted, µs.
    pub max_skew_us: i64,
    /// How far a reservation may lie ahead of its server's clock, ms.
    pub max_reservation_ahead_ms: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_skew_us: 50_000, max_reservation_ahead_ms: FAR_AHEAD_WARNING_MS }
    }
}

fn set_of(text: &str) -> Option<ShardSet> {
    // Every layout's shards fit 16 bits; another server's layout may differ from ours.
    ShardSet::parse(text, u32::from(u16::MAX)).ok()
}

/// The findings about `servers` (this server first, labelled by `labels`): one row per server
/// and check, `ok` when the check passed, so that a healthy fleet gives only `ok` rows.
pub fn judge(labels: &[String], servers: &[Reached], limits: &Limits) -> Vec<Finding> {
    let mut out = Vec::new();
    let info = |i: usize| match &servers[i] {
        Reached::Yes(info, _) => Some(info),
        _ => None,
    };
    let local = info(0);
    for (i, reached) in servers.iter().enumerate() {
        let mut push = |check: &'static str, ok: bool, detail: String, figures: serde_json::Value| {
            out.push(Finding { server: i, check, ok, detail, figures });
        };
        let (me, offset) = match reached {
            Reached::No(why) => {
                push("reachable", false, format!("could not ask it: {why}"), serde_json::json!({}));
                continue;
            }
            Reached::NoExtension(why) => {
                push("reachable", true, "connected".into(), serde_json::json!({}));
                push("extension", false, why.clone(), serde_json::json!({}));
                continue;
            }
            Reached::Yes(me, offset) => (me, *offset),
        };
        push("reachable", true, if i == 0 { "this server".into() } else { "connected".into() }, serde_json::json!({}));
        push(
            "extension",
            true,
            format!(
                "snowflake_id {} preloaded{}",
                me.version,
                if me.in_recovery { ", in recovery (a standby)" } else { "" }
            ),
            serde_json::json!({ "version": me.version, "in_recovery": me.in_recovery }),
        );
        // Layout and epoch, against this server's.
        if let Some(l) = local {
            let same = me.layout == l.layout && me.epoch_unix_ms == l.epoch_unix_ms;
            push(
                "layout",
                same,
                if same {
                    format!("{}, epoch {}", me.layout, me.epoch_unix_ms)
                } else {
                    format!(
                        "{} with epoch {} here, {} with epoch {} on this server: the same bits mean other times and shards",
                        me.layout, me.epoch_unix_ms, l.layout, l.epoch_unix_ms
                    )
                },
                serde_json::json!({ "layout": me.layout, "epoch_unix_ms": me.epoch_unix_ms }),
            );
        }
        // Configured shards: never told, or overlapping another primary's. A standby shares its
        // primary's settings and mints nothing, so it is left out on both sides.
        let mine = set_of(&me.shards);
        let others = |field: fn(&ServerInfo) -> &str| -> Vec<(usize, u32)> {
            let Some(a) = set_of(field(me)) else { return Vec::new() };
            (0..servers.len())
                .filter(|&j| j != i)
                .filter_map(|j| info(j).map(|o| (j, o)))
                .filter(|(_, o)| !o.in_recovery && !me.in_recovery)
                // A server that owns "*" is its own finding, not everyone's overlap.
                .filter_map(|(j, o)| {
                    set_of(field(o)).filter(|b| *b != ShardSet::All).and_then(|b| a.first_common(&b)).map(|s| (j, s))
                })
                .collect()
        };
        let overlaps = |list: &[(usize, u32)]| {
            list.iter().map(|&(j, s)| format!("{} (shard {s})", labels[j])).collect::<Vec<_>>().join(", ")
        };
        match &mine {
            None => push("shards", false, format!("snowflake_id.shards is not a shard list: \"{}\"", me.shards), serde_json::json!({ "shards": me.shards })),
            Some(ShardSet::All) if !me.in_recovery => push(
                "shards",
                false,
                "snowflake_id.shards is \"*\": this server was never told which shards it owns, and snowflake_next() refuses there"
                    .into(),
                serde_json::json!({ "shards": me.shards }),
            ),
            Some(_) => {
                let o = others(|s| &s.shards);
                push(
                    "shards",
                    o.is_empty(),
                    if o.is_empty() {
                        format!("owns {}, shared with no other primary of the list", me.shards)
                    } else {
                        format!("owns {}, as does {}: both may mint the same ids", me.shards, overlaps(&o))
                    },
                    serde_json::json!({ "shards": me.shards, "overlaps": o.iter().map(|&(j, s)| serde_json::json!({ "peer": labels[j], "shard": s })).collect::<Vec<_>>() }),
                );
            }
        }
        // Shards minted since each server started: an overlap here can already have repeated ids.
        let minted = others(|s| &s.minted);
        push(
            "minted shards",
            minted.is_empty(),
            if minted.is_empty() {
                format!(
                    "minted {} since its start, shared with no other primary",
                    if me.minted.is_empty() { "nothing" } else { &me.minted }
                )
            } else {
                format!("minted {} since its start, as did {}: ids may already repeat", me.minted, overlaps(&minted))
            },
            serde_json::json!({ "minted": me.minted }),
        );
        // Clones: another primary with the same system identifier.
        let clones: Vec<usize> = (0..servers.len())
            .filter(|&j| j != i)
            .filter(|&j| {
                info(j)
                    .is_some_and(|o| o.system_identifier == me.system_identifier && !o.in_recovery && !me.in_recovery)
            })
            .collect();
        push(
            "clone",
            clones.is_empty(),
            if clones.is_empty() {
                format!("system identifier {}, timeline {}", me.system_identifier, me.timeline)
            } else {
                format!(
                    "system identifier {} on timeline {}, also that of {}: a copy of one cluster running as a second primary, with its settings",
                    me.system_identifier,
                    me.timeline,
                    clones.iter().map(|&j| format!("{} on timeline {}", labels[j], info(j).map_or(0, |o| o.timeline))).collect::<Vec<_>>().join(", ")
                )
            },
            serde_json::json!({ "system_identifier": me.system_identifier, "timeline": me.timeline }),
        );
        // The clock against this server's.
        match offset {
            None if i == 0 => push("clock skew", true, "the reference".into(), serde_json::json!({ "offset_us": 0 })),
            None => push("clock skew", false, "no clock reading".into(), serde_json::json!({})),
            Some((off, err)) => {
                let ok = off.abs() + err <= limits.max_skew_us;
                push(
                    "clock skew",
                    ok,
                    format!(
                        "{:+.1} ms ± {:.1} ms against this server (at most {:.1} ms allowed)",
                        off as f64 / 1000.0,
                        err as f64 / 1000.0,
                        limits.max_skew_us as f64 / 1000.0
                    ),
                    serde_json::json!({ "offset_us": off, "error_us": err, "max_skew_us": limits.max_skew_us }),
                );
            }
        }
        // The reservation against the server's own clock.
        let ahead_ms = me.reserved_until_unix_ms - me.clock_unix_us.div_euclid(1000);
        push(
            "reservation",
            ahead_ms <= limits.max_reservation_ahead_ms,
            format!("{} ms ahead of its clock (at most {} ms)", ahead_ms, limits.max_reservation_ahead_ms),
            serde_json::json!({ "ahead_ms": ahead_ms, "max_ahead_ms": limits.max_reservation_ahead_ms }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(sysid: &str, shards: &str, minted: &str) -> ServerInfo {
        ServerInfo {
            system_identifier: sysid.into(),
            timeline: 1,
            in_recovery: false,
            layout: "41/13/9@1ms".into(),
            epoch_unix_ms: 1_735_689_600_000,
            shards: shards.into(),
            minted: minted.into(),
            reserved_until_unix_ms: 1_800_000_000_500,
            clock_unix_us: 1_800_000_000_000_000,
            version: "0.2.0".into(),
        }
    }

    fn labels(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("s{i}")).collect()
    }

    fn failed(f: &[Finding]) -> Vec<(usize, &'static str)> {
        f.iter().filter(|x| !x.ok).map(|x| (x.server, x.check)).collect()
    }

    #[test]
    fn a_healthy_fleet_gives_only_ok_rows() {
        let s = [
            Reached::Yes(server("1", "0-7", "0-3"), None),
            Reached::Yes(server("2", "8-15", "8"), Some((1200, 300))),
            Reached::Yes(server("3", "16-23", ""), Some((-800, 200))),
        ];
        let f = judge(&labels(3), &s, &Limits::default());
        assert_eq!(failed(&f), vec![]);
        // One row per server and check.
        assert_eq!(f.len(), 3 * 8);
    }

    #[test]
    fn a_clone_gives_two_findings_on_each_side() {
        let s = [
            Reached::Yes(server("42", "0-7", "0"), None),
            Reached::Yes(server("7", "8-15", "8"), Some((0, 100))),
            Reached::Yes(ServerInfo { timeline: 2, ..server("42", "0-7", "") }, Some((0, 100))),
        ];
        let f = judge(&labels(3), &s, &Limits::default());
        assert_eq!(failed(&f), vec![(0, "shards"), (0, "clone"), (2, "shards"), (2, "clone")]);
        let clone = f.iter().find(|x| x.server == 2 && x.check == "clone").unwrap();
        assert!(clone.detail.contains("on timeline 2, also that of s0 on timeline 1"), "{}", clone.detail);
    }

    #[test]
    fn a_standby_is_no_clone() {
        let s = [
            Reached::Yes(server("42", "0-7", "0"), None),
            Reached::Yes(ServerInfo { in_recovery: true, ..server("42", "0-7", "") }, Some((0, 100))),
        ];
        assert_eq!(failed(&judge(&labels(2), &s, &Limits::default())), vec![]);
    }

    #[test]
    fn overlaps_unconfigured_servers_minted_shards_layouts() {
        let s = [
            Reached::Yes(server("1", "0-7", "2"), None),
            Reached::Yes(server("2", "5-9", "9"), Some((0, 10))),
            Reached::Yes(server("3", "*", ""), Some((0, 10))),
            Reached::Yes(ServerInfo { layout: "41/10/12@1ms".into(), ..server("4", "100", "2") }, Some((0, 10))),
        ];
        let f = judge(&labels(4), &s, &Limits::default());
        let mut got = failed(&f);
        got.sort();
        assert_eq!(
            got,
            vec![
                (0, "minted shards"),
                (0, "shards"),
                (1, "shards"),
                (2, "shards"),
                (3, "layout"),
                (3, "minted shards"),
            ]
        );
    }

    #[test]
    fn skew_and_reservations_against_their_limits() {
        let ahead = ServerInfo { reserved_until_unix_ms: 1_800_000_000_000 + 120_000, ..server("2", "8", "") };
        let s = [
            Reached::Yes(server("1", "0", ""), None),
            Reached::Yes(ahead, Some((300_000, 400))),
            Reached::Yes(server("3", "9", ""), Some((49_000, 999))),
            Reached::Yes(server("4", "10", ""), Some((49_000, 1_001))),
        ];
        let f = judge(&labels(4), &s, &Limits::default());
        assert_eq!(failed(&f), vec![(1, "clock skew"), (1, "reservation"), (3, "clock skew")]);
        let skew = f.iter().find(|x| x.server == 1 && x.check == "clock skew").unwrap();
        assert_eq!(skew.detail, "+300.0 ms ± 0.4 ms against this server (at most 50.0 ms allowed)");
    }

    #[test]
    fn unreachable_peers_and_peers_without_the_extension() {
        let s = [
            Reached::Yes(server("1", "0", ""), None),
            Reached::No("timeout".into()),
            Reached::NoExtension("snowflake_id is not installed in that database".into()),
        ];
        assert_eq!(failed(&judge(&labels(3), &s, &Limits::default())), vec![(1, "reachable"), (2, "extension")]);
    }

    #[test]
    fn the_offset_comes_from_the_shortest_round_trip() {
        let s = [
            Sample { sent_us: 0, peer_us: 5_000, received_us: 4_000 },
            Sample { sent_us: 10_000, peer_us: 310_600, received_us: 11_000 },
            Sample { sent_us: 20_000, peer_us: 320_000, received_us: 30_000 },
        ];
        assert_eq!(clock_offset(&s), Some((300_100, 500)));
        assert_eq!(clock_offset(&[]), None);
        // A peer 300 ms ahead, read anywhere inside the round trip, is within the bound.
        for at in [0, 250, 999] {
            let (off, err) =
                clock_offset(&[Sample { sent_us: 1_000, peer_us: 301_000 + at, received_us: 2_000 }]).unwrap();
            assert!((off - 300_000).abs() <= err, "{off} ± {err}");
        }
    }

    #[test]
    fn server_info_round_trips_through_json() {
        let s = server("7301234567890123456", "0-7", "0-3,5");
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("\"7301234567890123456\""));
        assert_eq!(serde_json::from_str::<ServerInfo>(&j).unwrap(), s);
    }
}
