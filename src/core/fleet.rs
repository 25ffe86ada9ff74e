//! The fleet check's rules: what one server says about itself ([`ServerInfo`]), how a peer's
//! clock offset is measured from timed round trips ([`clock_offset`]), and the findings about a
//! set of servers ([`judge`]). The SQL function and the connections are `crate::runtime::fleet`.
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
    /// This run of the server (system identifier, postmaster pid and start time): two entries
    /// with the same one are the same server, listed twice or reached through another address.
    #[serde(default)]
    pub instance: String,
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
    let rtt = best.received_us - best.sent_us;
    let mid = best.sent_us + rtt.div_euclid(2);
    // A peer's reading is whatever it sent: saturate rather than overflow on one that lies.
    Some((best.peer_us.saturating_sub(mid), rtt.div_euclid(2) + rtt % 2))
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
///
/// Two entries of the same running server (the same `instance`) are never compared with each
/// other. A standby mints nothing until promoted, so it is compared as what it will become: its
/// shards must be a list, and must not overlap those of a primary with another system
/// identifier (its own primary's are the same by design).
pub fn judge(labels: &[String], servers: &[Reached], limits: &Limits) -> Vec<Finding> {
    let mut out = Vec::new();
    let info = |i: usize| match &servers[i] {
        Reached::Yes(info, _) => Some(info),
        _ => None,
    };
    let same_server = |a: &ServerInfo, b: &ServerInfo| !a.instance.is_empty() && a.instance == b.instance;
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
        let twin = (0..i).find(|&j| info(j).is_some_and(|o| same_server(o, me)));
        push(
            "reachable",
            true,
            match (i, twin) {
                (0, _) => "this server".into(),
                (_, Some(j)) => format!("connected: the same server as {}", labels[j]),
                _ => "connected".into(),
            },
            serde_json::json!({}),
        );
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
                        "{} with epoch {} here, {} with epoch {} on this server: the same bits mean other times and \
                            shards",
                        me.layout, me.epoch_unix_ms, l.layout, l.epoch_unix_ms
                    )
                },
                serde_json::json!({ "layout": me.layout, "epoch_unix_ms": me.epoch_unix_ms }),
            );
        }
        // The other servers this one is compared with: other running servers, primaries only,
        // and for a standby only primaries of another cluster.
        let peers = |field: fn(&ServerInfo) -> &str| -> Vec<(usize, u32)> {
            let Some(a) = set_of(field(me)) else { return Vec::new() };
            (0..servers.len())
                .filter(|&j| j != i)
                .filter_map(|j| info(j).map(|o| (j, o)))
                .filter(|(_, o)| !same_server(o, me) && !o.in_recovery)
                .filter(|(_, o)| !me.in_recovery || o.system_identifier != me.system_identifier)
                // A server that owns "*" is its own finding, not everyone's overlap.
                .filter_map(|(j, o)| {
                    set_of(field(o)).filter(|b| *b != ShardSet::All).and_then(|b| a.first_common(&b)).map(|s| (j, s))
                })
                .collect()
        };
        let overlaps = |list: &[(usize, u32)]| {
            list.iter().map(|&(j, s)| format!("{} (shard {s})", labels[j])).collect::<Vec<_>>().join(", ")
        };
        let mine = set_of(&me.shards);
        match &mine {
            None => push(
                "shards",
                false,
                format!("snowflake_id.shards is not a shard list: \"{}\"", me.shards),
                serde_json::json!({ "shards": me.shards }),
            ),
            Some(ShardSet::All) => push(
                "shards",
                false,
                if me.in_recovery {
                    "snowflake_id.shards is \"*\": promoted, this standby's snowflake_next() would refuse".into()
                } else {
                    "snowflake_id.shards is \"*\": this server was never told which shards it owns, and \
                        snowflake_next() refuses there"
                        .into()
                },
                serde_json::json!({ "shards": me.shards }),
            ),
            Some(_) => {
                let o = peers(|s| &s.shards);
                push(
                    "shards",
                    o.is_empty(),
                    match (o.is_empty(), me.in_recovery) {
                        (true, false) => format!("owns {}, shared with no other primary of the list", me.shards),
                        (true, true) => {
                            format!("owns {} (a standby), shared with no primary of another cluster", me.shards)
                        }
                        (false, _) => {
                            format!("owns {}, as does {}: both may mint the same ids", me.shards, overlaps(&o))
                        }
                    },
                    serde_json::json!({
                        "shards": me.shards,
                        "overlaps": o
                            .iter()
                            .map(|&(j, s)| serde_json::json!({ "peer": labels[j], "shard": s }))
                            .collect::<Vec<_>>(),
                    }),
                );
            }
        }
        // Shards minted since each server started: an overlap here can already have repeated ids.
        let minted = if me.in_recovery { Vec::new() } else { peers(|s| &s.minted) };
        push(
            "minted shards",
            minted.is_empty(),
            if minted.is_empty() {
                format!(
                    "minted {} since its start (or its statistics' reset), shared with no other primary",
                    if me.minted.is_empty() { "nothing" } else { &me.minted }
                )
            } else {
                format!("minted {} since its start, as did {}: ids may already repeat", me.minted, overlaps(&minted))
            },
            serde_json::json!({ "minted": me.minted }),
        );
        // Clones: another running primary with the same system identifier.
        let clones: Vec<usize> = (0..servers.len())
            .filter(|&j| j != i)
            .filter(|&j| {
                info(j).is_some_and(|o| {
                    o.system_identifier == me.system_identifier
                        && !same_server(o, me)
                        && !o.in_recovery
                        && !me.in_recovery
                })
            })
            .collect();
        push(
            "clone",
            clones.is_empty(),
            if clones.is_empty() {
                format!("system identifier {}, timeline {}", me.system_identifier, me.timeline)
            } else {
                format!(
                    "system identifier {} on timeline {}, also that of {}: a copy of one cluster running as a second \
                        primary, with its settings",
                    me.system_identifier,
                    me.timeline,
                    clones
                        .iter()
                        .map(|&j| format!("{} on timeline {}", labels[j], info(j).map_or(0, |o| o.timeline)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            serde_json::json!({ "system_identifier": me.system_identifier, "timeline": me.timeline }),
        );
        // The clock against every other server's: ids of two servers are ordered by their clocks
        // to within the offset between those two. Offsets are measured against this server, so
        // the offset between two peers is the difference, and its error the sum of theirs.
        let mine_offset = if i == 0 { Some((0, 0)) } else { offset };
        match mine_offset {
            None => push("clock skew", false, "no clock reading".into(), serde_json::json!({})),
            Some((off, err)) => {
                let worst = (0..servers.len())
                    .filter(|&j| j != i)
                    .filter_map(|j| match &servers[j] {
                        Reached::Yes(o, _) if same_server(o, me) => None,
                        Reached::Yes(_, Some(x)) => Some((j, *x)),
                        Reached::Yes(_, None) if j == 0 => Some((0, (0, 0))),
                        _ => None,
                    })
                    .map(|(j, (o2, e2))| (j, off.saturating_sub(o2), err.saturating_add(e2)))
                    .max_by_key(|&(_, d, e)| d.saturating_abs().saturating_add(e));
                match worst {
                    None => push(
                        "clock skew",
                        true,
                        "no other clock to compare with".into(),
                        serde_json::json!({ "offset_us": off, "error_us": err }),
                    ),
                    Some((j, d, e)) => {
                        let ok = d.saturating_abs().saturating_add(e) <= limits.max_skew_us;
                        push(
                            "clock skew",
                            ok,
                            format!(
                                "{:+.1} ms ± {:.1} ms against {} (at most {:.1} ms allowed between any two servers)",
                                d as f64 / 1000.0,
                                e as f64 / 1000.0,
                                labels[j],
                                limits.max_skew_us as f64 / 1000.0
                            ),
                            serde_json::json!({
                                "offset_us": off,
                                "error_us": err,
                                "worst_pair": labels[j],
                                "worst_offset_us": d,
                                "worst_error_us": e,
                                "max_skew_us": limits.max_skew_us,
                            }),
                        );
                    }
                }
            }
        }
        // The reservation against the server's own clock.
        if me.reserved_until_unix_ms <= 0 {
            push(
                "reservation",
                true,
                "none yet: nothing minted since the data directory was made".into(),
                serde_json::json!({ "ahead_ms": null }),
            );
        } else {
            let ahead_ms = me.reserved_until_unix_ms.saturating_sub(me.clock_unix_us.div_euclid(1000));
            push(
                "reservation",
                ahead_ms <= limits.max_reservation_ahead_ms,
                if ahead_ms > 0 {
                    format!("{} ms ahead of its clock (at most {} ms)", ahead_ms, limits.max_reservation_ahead_ms)
                } else {
                    format!("{} ms behind its clock: idle since then", ahead_ms.saturating_neg())
                },
                serde_json::json!({ "ahead_ms": ahead_ms, "max_ahead_ms": limits.max_reservation_ahead_ms }),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// A server of its own run (instance) every time.
    fn server(sysid: &str, shards: &str, minted: &str) -> ServerInfo {
        ServerInfo {
            instance: format!("{sysid}-{}", RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
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
    fn skew_is_judged_between_every_pair() {
        // Two peers 45 ms either side of this server: each is fine against it, not against the
        // other.
        let s = [
            Reached::Yes(server("1", "0", ""), None),
            Reached::Yes(server("2", "8", ""), Some((45_000, 100))),
            Reached::Yes(server("3", "9", ""), Some((-45_000, 100))),
        ];
        let f = judge(&labels(3), &s, &Limits::default());
        assert_eq!(failed(&f), vec![(1, "clock skew"), (2, "clock skew")]);
        let skew = f.iter().find(|x| x.server == 1 && x.check == "clock skew").unwrap();
        assert_eq!(skew.detail, "+90.0 ms ± 0.2 ms against s2 (at most 50.0 ms allowed between any two servers)");
        // At the limit, the error bound counts.
        let at = |err| {
            let s = [Reached::Yes(server("1", "0", ""), None), Reached::Yes(server("2", "8", ""), Some((49_000, err)))];
            failed(&judge(&labels(2), &s, &Limits::default()))
        };
        assert_eq!(at(1_000), vec![]);
        assert_eq!(at(1_001), vec![(0, "clock skew"), (1, "clock skew")]);
    }

    #[test]
    fn reservations_against_their_own_clock() {
        let ahead = ServerInfo { reserved_until_unix_ms: 1_800_000_000_000 + 120_000, ..server("2", "8", "") };
        let never = ServerInfo { reserved_until_unix_ms: 0, ..server("3", "9", "") };
        let lying = ServerInfo { reserved_until_unix_ms: i64::MAX, clock_unix_us: i64::MIN, ..server("4", "10", "") };
        let s = [
            Reached::Yes(server("1", "0", ""), None),
            Reached::Yes(ahead, Some((0, 10))),
            Reached::Yes(never, Some((0, 10))),
            Reached::Yes(lying, Some((i64::MAX, i64::MAX))),
        ];
        let f = judge(&labels(4), &s, &Limits::default());
        let mut got = failed(&f);
        got.sort();
        assert_eq!(
            got,
            vec![
                (0, "clock skew"),
                (1, "clock skew"),
                (1, "reservation"),
                (2, "clock skew"),
                (3, "clock skew"),
                (3, "reservation")
            ]
        );
    }

    #[test]
    fn the_same_server_twice_is_no_finding() {
        let me = server("1", "0-7", "0");
        let s = [
            Reached::Yes(me.clone(), None),
            Reached::Yes(me, Some((0, 10))),
            Reached::Yes(server("2", "8", ""), Some((0, 10))),
        ];
        let f = judge(&labels(3), &s, &Limits::default());
        assert_eq!(failed(&f), vec![]);
        assert!(f.iter().any(|x| x.server == 1 && x.detail == "connected: the same server as s0"));
    }

    #[test]
    fn standbys_are_judged_as_what_they_become() {
        let standby = |sysid: &str, shards: &str| ServerInfo { in_recovery: true, ..server(sysid, shards, "") };
        let s = [
            Reached::Yes(server("1", "0-7", "0"), None),
            Reached::Yes(server("2", "8-15", "8"), Some((0, 10))),
            // Server 1's own standby, the same shards: fine.
            Reached::Yes(standby("1", "0-7"), Some((0, 10))),
            // A standby of server 2 given server 1's shards: duplicates after a failover.
            Reached::Yes(standby("2", "0-3"), Some((0, 10))),
            // A standby never told its shards: it would refuse once promoted.
            Reached::Yes(standby("1", "*"), Some((0, 10))),
        ];
        assert_eq!(failed(&judge(&labels(5), &s, &Limits::default())), vec![(3, "shards"), (4, "shards")]);
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
