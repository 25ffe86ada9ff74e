//! Shard fencing: the set of shards a server may mint for (`snowflake_id.shards`).
//!
//! Two servers configured with the same shard is the classic way snowflake ids collide. Listing
//! each server's shards and refusing the others catches that mistake at the call site.

use std::fmt;

/// A set of shards, as inclusive ranges, or every shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardSet {
    All,
    /// Sorted, non-overlapping, non-adjacent inclusive ranges.
    Ranges(Vec<(u32, u32)>),
}

impl ShardSet {
    /// Parses `*` (every shard), or a comma-separated list of shards and inclusive ranges such
    /// as `0-15,40`. Blanks are ignored; overlapping ranges are merged.
    ///
    /// # Errors
    /// A message saying what is wrong: an empty list, a malformed item, a reversed range, or a
    /// shard above `max_shard`.
    pub fn parse(text: &str, max_shard: u32) -> Result<ShardSet, String> {
        let text = text.trim();
        if text == "*" {
            return Ok(ShardSet::All);
        }
        if text.is_empty() {
            return Err("the list of shards is empty; use * for every shard".into());
        }
        let mut ranges = Vec::new();
        for item in text.split(',').map(str::trim) {
            let num = |t: &str| {
                t.trim().parse::<u32>().map_err(|_| format!("\"{item}\" is not a shard or a range such as 0-15"))
            };
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(item)?, num(item)?),
            };
            if lo > hi {
                return Err(format!("range \"{item}\" runs backwards"));
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
        if merged == [(0, max_shard)] {
            return Ok(ShardSet::All);
        }
        Ok(ShardSet::Ranges(merged))
    }

    #[inline]
    pub fn contains(&self, shard: u32) -> bool {
        match self {
            ShardSet::All => true,
            ShardSet::Ranges(r) => r.iter().any(|&(lo, hi)| (lo..=hi).contains(&shard)),
        }
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
        assert_eq!(ShardSet::parse("0-8191", 8191), Ok(ShardSet::All));
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
}
