//! Shard fencing: the set of shards a server may mint for (`snowflake_id.shards`).
//!
//! Two servers configured with the same shard is the classic way snowflake ids collide. Listing
//! each server's shards and refusing the others catches that mistake at the call site.

use std::fmt;

use super::excerpt::excerpt;

/// The longest shard list [`ShardSet::parse`] reads, in bytes.
pub const MAX_SHARDS_LEN: usize = 4096;

/// The most items (shards or ranges) a shard list may have. A server's shards are normally one
/// range or a few.
pub const MAX_SHARD_ITEMS: usize = 1024;

/// A set of shards, as inclusive ranges, or every shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardSet {
    All,
    /// Sorted, non-overlapping, non-adjacent inclusive ranges.
    Ranges(Vec<(u32, u32)>),
}

impl ShardSet {
    /// Parses `*` (every shard), or a comma-separated list of shards and inclusive ranges such
    /// as `0-15,40`. Blanks are ignored; overlapping ranges are merged. The text is at most
    /// [`MAX_SHARDS_LEN`] bytes and [`MAX_SHARD_ITEMS`] items.
    ///
    /// # Errors
    /// A message saying what is wrong: a list too long, an empty list, a malformed item, a
    /// reversed range, or a shard above `max_shard`. It quotes at most an [`excerpt`] of an item.
    pub fn parse(text: &str, max_shard: u32) -> Result<ShardSet, String> {
        if text.len() > MAX_SHARDS_LEN {
            return Err(format!(
                "the list of shards is {} bytes long, and it may be at most {MAX_SHARDS_LEN}; use ranges such as 0-15",
                text.len()
            ));
        }
        let text = text.trim();
        if text == "*" {
            return Ok(ShardSet::All);
        }
        if text.is_empty() {
            return Err("the list of shards is empty; use * for every shard".into());
        }
        let mut ranges = Vec::new();
        for (i, item) in text.split(',').map(str::trim).enumerate() {
            if i == MAX_SHARD_ITEMS {
                return Err(format!(
                    "the list of shards has more than {MAX_SHARD_ITEMS} items; use ranges such as 0-15"
                ));
            }
            let num = |t: &str| {
                t.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("\"{}\" is not a shard or a range such as 0-15", excerpt(item)))
            };
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(item)?, num(item)?),
            };
            if lo > hi {
                return Err(format!("range \"{}\" runs backwards", excerpt(item)));
            }
            if hi > max_shard {
                return Err(format!("shard {hi} is out of range: the layout's shards are 0 to {max_shard}"));
            }
            ranges.push((lo, hi));
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        // A list that names every shard stays a list: a server told it owns them all (the only
        // server of its id space) is not one that was never told (`*`).
        Ok(ShardSet::Ranges(merged))
    }

    #[inline]
    pub fn contains(&self, shard: u32) -> bool {
        match self {
            ShardSet::All => true,
            // The ranges are sorted and disjoint: the first one ending at or after `shard` is
            // the only one that can hold it. A binary search, as a list may have many ranges.
            ShardSet::Ranges(r) => {
                let i = r.partition_point(|&(_, hi)| hi < shard);
                r.get(i).is_some_and(|&(lo, _)| lo <= shard)
            }
        }
    }
}

impl ShardSet {
    /// The shards of a list, in ascending order; `None` for every shard (`*`), which is not a
    /// set a server can own.
    pub fn owned(&self) -> Option<impl Iterator<Item = u32> + '_> {
        match self {
            ShardSet::All => None,
            ShardSet::Ranges(r) => Some(r.iter().flat_map(|&(lo, hi)| lo..=hi)),
        }
    }

    /// The shards of a list from the `skip`-th on (0-based), in ascending order: a walk over the
    /// ranges, not over the shards skipped. `None` for `*`.
    pub fn owned_from(&self, skip: u64) -> Option<impl Iterator<Item = u32> + '_> {
        let ShardSet::Ranges(r) = self else { return None };
        let mut left = skip;
        let mut first = r.len();
        let mut start = 0u32;
        for (i, &(lo, hi)) in r.iter().enumerate() {
            let n = u64::from(hi - lo) + 1;
            if left < n {
                first = i;
                start = lo + left as u32;
                break;
            }
            left -= n;
        }
        Some(
            r[first.min(r.len())..]
                .iter()
                .enumerate()
                .flat_map(move |(i, &(lo, hi))| (if i == 0 { start } else { lo })..=hi),
        )
    }

    /// How many shards a list holds (`None` for `*`).
    pub fn count(&self) -> Option<u64> {
        match self {
            ShardSet::All => None,
            ShardSet::Ranges(r) => Some(r.iter().map(|&(lo, hi)| u64::from(hi - lo) + 1).sum()),
        }
    }

    /// Whether two sets share a shard, and the first one they share.
    pub fn first_common(&self, other: &ShardSet) -> Option<u32> {
        match (self, other) {
            (ShardSet::All, ShardSet::All) => Some(0),
            (ShardSet::All, s) | (s, ShardSet::All) => s.owned().and_then(|mut i| i.next()),
            (ShardSet::Ranges(a), ShardSet::Ranges(b)) => {
                let (mut i, mut j) = (0, 0);
                while i < a.len() && j < b.len() {
                    let (lo, hi) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
                    if lo <= hi {
                        return Some(lo);
                    }
                    if a[i].1 < b[j].1 {
                        i += 1;
                    } else {
                        j += 1;
                    }
                }
                None
            }
        }
    }
}

/// Which of a server's shards `snowflake_next()` mints from, given each owned shard with its next
/// free word, in the order the shards are owned (`crate::core::monotonic`'s state words, read one
/// at a time, so that a caller stops early): the first one with room in the current tick, that is
/// whose next word is in the clock's tick or before it; if every shard has run past the current
/// tick, the one whose next word is in the earliest tick (the least lead), the first of those on
/// a tie, so that a borrowed tick is filled in shard order too.
/// `None` when there is no shard at all.
///
/// So a server owning 8 shards of 512 ids a tick mints 4,096 ids a tick before any of them runs
/// ahead of the clock, and ahead of it fills each borrowed tick across all its shards in turn.
pub fn pick<T>(shards: impl IntoIterator<Item = (T, u64)>, now_tick: u64, low_bits: u32) -> Option<T> {
    let mut earliest: Option<(u64, T)> = None;
    for (shard, w) in shards {
        if w >> low_bits <= now_tick {
            return Some(shard);
        }
        if earliest.as_ref().is_none_or(|(e, _)| w >> low_bits < *e) {
            earliest = Some((w >> low_bits, shard));
        }
    }
    earliest.map(|(_, s)| s)
}

/// The shard plan (docs/fleet.md): server `server` of at most `servers`, in a layout of
/// `shard_count` shards, owns the inclusive block `server·shard_count/servers ..
/// (server+1)·shard_count/servers − 1`. Blocks of consecutive servers are adjacent and never
/// overlap; `None` when the plan has no such server (`server >= servers`) or gives it no shard
/// (more servers than shards).
pub fn plan_block(server: u64, servers: u64, shard_count: u64) -> Option<(u32, u32)> {
    if server >= servers || servers > shard_count {
        return None;
    }
    let bound = |k: u64| u32::try_from(u128::from(k) * u128::from(shard_count) / u128::from(servers)).ok();
    Some((bound(server)?, bound(server + 1)?.checked_sub(1)?))
}

/// The shard plan for a layout of `shard_count` shards, as one sentence: 64 blocks (fewer when the
/// layout has fewer shards), the last kept out of every server's line for backfills where the
/// layout has 8 shards or more (docs/fleet.md), server 1's line as the example. What the hint of a
/// server that owns no shards says.
pub fn plan_sentence(shard_count: u64) -> String {
    let blocks = shard_count.min(64);
    let reserve = if shard_count >= 8 { plan_block(blocks - 1, blocks, shard_count) } else { None };
    let servers = if reserve.is_some() { blocks - 1 } else { blocks };
    let kept = match reserve {
        Some((lo, hi)) if lo == hi => format!("; shard {lo} stays in no server's line, for backfills"),
        Some((lo, hi)) => format!("; shards {lo}-{hi} stay in no server's line, for backfills"),
        None => String::new(),
    };
    match (plan_block(1, blocks, shard_count), shard_count / blocks.max(1)) {
        (Some((lo, hi)), block) if block > 1 => format!(
            "Give each server its own block of shards: with up to {servers} servers, server k owns shards \
            k*{block} to k*{block}+{}, for example snowflake_id.shards = '{lo}-{hi}' on server 1{kept}.",
            block - 1
        ),
        (Some((lo, _)), _) => format!(
            "Give each server its own shard: with up to {servers} servers, server k owns shard k, for example \
            snowflake_id.shards = '{lo}' on server 1{kept}."
        ),
        _ => "This layout has one shard, so only one server may mint snowflake ids: give it \
            snowflake_id.shards = '0'."
            .to_owned(),
    }
}

/// The canonical spelling, which [`ShardSet::parse`] reads back.
impl fmt::Display for ShardSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardSet::All => f.write_str("*"),
            ShardSet::Ranges(r) => {
                for (i, &(lo, hi)) in r.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if lo == hi {
                        write!(f, "{lo}")?;
                    } else {
                        write!(f, "{lo}-{hi}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_plan() {
        // docs/fleet.md's table: 64 blocks of 128 of the default 8,192 shards, the last kept for backfills.
        assert_eq!(plan_block(0, 64, 8192), Some((0, 127)));
        assert_eq!(plan_block(1, 64, 8192), Some((128, 255)));
        assert_eq!(plan_block(63, 64, 8192), Some((8064, 8191)));
        assert_eq!(plan_block(64, 64, 8192), None);
        assert_eq!(plan_block(1, 64, 1024), Some((16, 31)));
        assert_eq!(plan_block(2, 3, 8), Some((5, 7)));
        assert_eq!(plan_block(0, 1, 1), Some((0, 0)));
        assert_eq!(plan_block(0, 2, 1), None);
        // Every shard in exactly one block, for any ceiling.
        for (servers, count) in [(1, 1), (3, 8), (7, 1024), (64, 65536), (100, 8192)] {
            let blocks: Vec<_> = (0..servers).map(|k| plan_block(k, servers, count).unwrap()).collect();
            assert_eq!(blocks[0].0, 0);
            assert_eq!(u64::from(blocks[blocks.len() - 1].1) + 1, count);
            assert!(blocks.windows(2).all(|w| w[0].1 + 1 == w[1].0 && w[0].0 <= w[0].1));
        }
    }

    #[test]
    fn the_plan_in_words() {
        let example = |count| {
            let s = plan_sentence(count);
            s[s.find("snowflake_id.shards = ").unwrap()..].split(' ').nth(2).unwrap().to_owned()
        };
        assert_eq!(example(8192), "'128-255'");
        assert!(plan_sentence(8192).contains("with up to 63 servers, server k owns shards k*128 to k*128+127"));
        assert!(plan_sentence(8192).ends_with("; shards 8064-8191 stay in no server's line, for backfills."));
        assert!(plan_sentence(16).ends_with(
            "with up to 15 servers, server k owns shard k, for example snowflake_id.shards = '1' on server 1; \
            shard 15 stays in no server's line, for backfills."
        ));
        assert_eq!(example(65536), "'1024-2047'");
        assert_eq!(example(1024), "'16-31'");
        assert_eq!(example(128), "'2-3'");
        assert_eq!(example(64), "'1'");
        assert!(plan_sentence(2).contains("with up to 2 servers, server k owns shard k"));
        assert!(plan_sentence(1).starts_with("This layout has one shard"));
        // Every example parses in its layout.
        for bits in 0..=16 {
            let count = 1u64 << bits;
            let line = example(count);
            ShardSet::parse(line.trim_matches(|c| c == '\'' || c == '.'), (count - 1) as u32).unwrap();
        }
    }

    #[test]
    fn owned_shards_in_order() {
        let s = ShardSet::parse("8-10,2", 8191).unwrap();
        assert_eq!(s.owned().unwrap().collect::<Vec<_>>(), vec![2, 8, 9, 10]);
        assert_eq!(s.count(), Some(4));
        assert!(ShardSet::All.owned().is_none() && ShardSet::All.count().is_none());
    }

    #[test]
    fn owned_from_a_position() {
        let s = ShardSet::parse("8-10,2,20-21", 8191).unwrap();
        let all: Vec<u32> = s.owned().unwrap().collect();
        for skip in 0..8 {
            let from: Vec<u32> = s.owned_from(skip).unwrap().collect();
            assert_eq!(from, all.iter().copied().skip(skip as usize).collect::<Vec<_>>(), "skip {skip}");
        }
        assert!(ShardSet::All.owned_from(0).is_none());
    }

    #[test]
    fn overlaps() {
        let p = |t: &str| ShardSet::parse(t, 8191).unwrap();
        assert_eq!(p("0-7").first_common(&p("8-15")), None);
        assert_eq!(p("0-7,20").first_common(&p("8-15,18-25")), Some(20));
        assert_eq!(p("5").first_common(&p("0-9")), Some(5));
        assert_eq!(p("3-4").first_common(&ShardSet::All), Some(3));
        assert_eq!(ShardSet::All.first_common(&ShardSet::All), Some(0));
    }

    #[test]
    fn pick_fills_the_current_tick_across_shards_first() {
        const LOW: u32 = 9;
        let w = |tick: u64, seq: u64| tick << LOW | seq;
        let p = |words: &[u64]| pick(words.iter().copied().enumerate(), 100, LOW);
        // Room in the current tick (100) on the first shard: it.
        assert_eq!(p(&[w(100, 5), w(100, 0)]), Some(0));
        // A shard last used in an earlier tick has room now.
        assert_eq!(p(&[w(101, 0), w(99, 511)]), Some(1));
        // The first shard exhausted tick 100 (its next word is tick 101's first): the second.
        assert_eq!(p(&[w(101, 0), w(100, 300), w(100, 0)]), Some(1));
        // Every shard ahead of the clock: the least lead, the first on a tie (in that tick).
        assert_eq!(p(&[w(102, 0), w(101, 7), w(101, 0)]), Some(1));
        assert_eq!(p(&[w(101, 0), w(101, 0)]), Some(0));
        assert_eq!(p(&[]), None);
        // It stops at the first shard with room: a shard after it is never read.
        let mut read = 0;
        let words = [(7, w(101, 0)), (9, w(100, 0)), (12, w(100, 0))].into_iter().inspect(|_| read += 1);
        assert_eq!(pick(words, 100, LOW), Some(9));
        assert_eq!(read, 2);
    }

    /// Minting from 8 shards with a fake clock stopped in one tick: 4,096 ids in that tick, in
    /// shard order, before the first borrowed tick; then the borrowed tick fills the same way.
    #[test]
    fn eight_shards_mint_eight_ticks_worth_before_running_ahead() {
        const LOW: u32 = 9;
        let mut next = [100u64 << LOW; 8];
        let mut minted = Vec::new();
        for _ in 0..(2 * 8 * 512) {
            let s = pick(next.iter().copied().enumerate(), 100, LOW).unwrap();
            let word = next[s].max(100 << LOW);
            next[s] = word + 1;
            minted.push((word >> LOW, s, word & 511));
        }
        assert!(minted[..4096].iter().all(|&(tick, _, _)| tick == 100), "4,096 ids in the clock's tick");
        assert!(minted[4096..].iter().all(|&(tick, _, _)| tick == 101));
        // In one tick they go by shard, then sequence: ids increase in the order they are minted.
        assert!(minted.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn parses_lists_and_ranges() {
        let s = ShardSet::parse("0-15, 40", 8191).unwrap();
        assert_eq!(s, ShardSet::Ranges(vec![(0, 15), (40, 40)]));
        assert!(s.contains(0) && s.contains(15) && s.contains(40));
        assert!(!s.contains(16) && !s.contains(39) && !s.contains(41));
        assert_eq!(s.to_string(), "0-15,40");
        assert_eq!(ShardSet::parse(&s.to_string(), 8191), Ok(s));
    }

    #[test]
    fn merges_and_normalises() {
        assert_eq!(ShardSet::parse("40,3-5,4-9,10", 8191).unwrap().to_string(), "3-10,40");
        assert_eq!(ShardSet::parse("*", 8191), Ok(ShardSet::All));
        // Every shard, listed: still a list, which snowflake_next() may mint from.
        assert_eq!(ShardSet::parse("0-8191", 8191), Ok(ShardSet::Ranges(vec![(0, 8191)])));
        assert!(ShardSet::All.contains(8191));
    }

    #[test]
    fn refuses_bad_lists() {
        for bad in ["", "a", "1-", "-1", "5-3", "1,,2", "8192", "0-9000", "1.5"] {
            assert!(ShardSet::parse(bad, 8191).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(
            ShardSet::parse("8192", 8191),
            Err("shard 8192 is out of range: the layout's shards are 0 to 8191".into())
        );
    }

    #[test]
    fn long_lists_are_refused_unread_with_a_short_message() {
        let huge = "0,".repeat(2 << 20);
        let e = ShardSet::parse(&huge, 8191).unwrap_err();
        assert!(e.len() < 200, "{} bytes: {e}", e.len());
        assert!(e.contains("4194304 bytes long"), "{e}");
        // Within the byte bound, the item count is bounded too.
        let items = |n: usize| vec!["7"; n].join(",");
        assert_eq!(ShardSet::parse(&items(MAX_SHARD_ITEMS), 8191), Ok(ShardSet::Ranges(vec![(7, 7)])));
        let e = ShardSet::parse(&items(MAX_SHARD_ITEMS + 1), 8191).unwrap_err();
        assert_eq!(e, "the list of shards has more than 1024 items; use ranges such as 0-15");
        // A malformed item is quoted in part.
        let e = ShardSet::parse(&format!("1,{}", "x".repeat(3000)), 8191).unwrap_err();
        assert_eq!(e, format!("\"{}…\" is not a shard or a range such as 0-15", "x".repeat(32)));
        let e = ShardSet::parse(&format!("{}-1", "9".repeat(40)), u32::MAX).unwrap_err();
        assert!(e.len() < 100, "{e}");
    }

    #[test]
    fn contains_finds_every_range() {
        let s = ShardSet::parse("3-10,40,42-50,8191", 8191).unwrap();
        let want = |x: u32| (3..=10).contains(&x) || x == 40 || (42..=50).contains(&x) || x == 8191;
        for x in 0..=8192 {
            assert_eq!(s.contains(x), want(x), "{x}");
        }
        assert!(!s.contains(u32::MAX));
    }

    mod props {
        use proptest::prelude::*;

        use super::super::*;
        use crate::core::excerpt::tests::any_text;

        /// A max shard, and up to 40 shards and ranges below it.
        fn items() -> impl Strategy<Value = (u32, Vec<(u32, u32)>)> {
            prop_oneof![Just(0u32), Just(8191), Just(65535), Just(u32::MAX), any::<u32>()].prop_flat_map(|max| {
                let item = (0..=max, 0..=max, any::<bool>(), 0..32u32).prop_map(move |(a, b, single, len)| {
                    if single {
                        (a, a)
                    } else {
                        // Short ranges as well as arbitrary ones, so that some merge.
                        let (lo, hi) = (a.min(b), a.max(b));
                        (lo, if len < 16 { lo.saturating_add(len).min(max) } else { hi })
                    }
                });
                (Just(max), proptest::collection::vec(item, 1..40))
            })
        }

        fn spell(items: &[(u32, u32)], blanks: bool) -> String {
            let sep = if blanks { " , " } else { "," };
            let item = |&(lo, hi): &(u32, u32)| {
                if lo == hi && !blanks {
                    lo.to_string()
                } else if blanks {
                    format!(" {lo} - {hi} ")
                } else {
                    format!("{lo}-{hi}")
                }
            };
            items.iter().map(item).collect::<Vec<_>>().join(sep)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn parse_never_panics_and_errors_are_short(
                text in prop_oneof![any_text(), "[0-9 ,*-]{0,200}"],
                max in prop_oneof![Just(8191u32), any::<u32>()],
            ) {
                match ShardSet::parse(&text, max) {
                    Ok(ShardSet::All) => {}
                    Ok(ShardSet::Ranges(r)) => {
                        prop_assert!(!r.is_empty() && r.len() <= MAX_SHARD_ITEMS);
                        prop_assert!(r.iter().all(|&(lo, hi)| lo <= hi && hi <= max));
                    }
                    Err(e) => prop_assert!(e.len() <= 200, "{}", e),
                }
            }

            #[test]
            fn lists_parse_merge_and_round_trip(
                (max, items) in items(),
                blanks in any::<bool>(),
                probes in proptest::collection::vec(any::<u32>(), 16),
            ) {
                let set = ShardSet::parse(&spell(&items, blanks), max).unwrap();
                let listed = |x: u32| items.iter().any(|&(lo, hi)| (lo..=hi).contains(&x));
                let edges = items.iter().flat_map(|&(lo, hi)| [lo.wrapping_sub(1), lo, hi, hi.wrapping_add(1)]);
                let inside = probes.iter().map(|p| p % max.saturating_add(1));
                for x in edges.chain(probes.iter().copied()).chain(inside) {
                    // All holds every shard; the layout keeps larger ones out before this test.
                    prop_assert_eq!(set.contains(x), listed(x) || set == ShardSet::All, "{}", x);
                }
                match &set {
                    ShardSet::All => prop_assert!((0..=max.min(100_000)).all(listed)),
                    ShardSet::Ranges(r) => {
                        // Sorted, disjoint and not adjacent: merged as far as they go.
                        prop_assert!(r.windows(2).all(|p| u64::from(p[0].1) + 1 < u64::from(p[1].0)));
                        prop_assert!(r.iter().all(|&(lo, hi)| lo <= hi && hi <= max));
                    }
                }
                prop_assert_eq!(ShardSet::parse(&set.to_string(), max), Ok(set));
            }
        }
    }
}
