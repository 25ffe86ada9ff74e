//! How much of a refused text an error message quotes: a bounded prefix, whatever the input.

/// How much of a refused text an error message quotes, in characters.
pub const EXCERPT_CHARS: usize = 32;

/// The start of `text` for an error message: all of it when it has at most [`EXCERPT_CHARS`]
/// characters, otherwise that many followed by `…`. Cut on a character boundary, so any `&str`
/// is fine; the work and the result are bounded whatever the length of `text`.
pub fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Any text a parser may be handed: arbitrary unicode, text made of the characters of
    /// layouts, timestamps and shard lists, and long text.
    pub(crate) fn any_text() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[0-9/@ms \t,.+-]{0,70}",
            "[ ]{0,4}[0-9]{1,3} ?/ ?[0-9]{1,3} ?/ ?[0-9]{1,3}( ?@ ?[0-9]{1,5} ?(ms)?)?[ ]{0,4}",
            proptest::collection::vec(any::<char>(), 0..2000).prop_map(String::from_iter),
            (any::<char>(), 0usize..100_000).prop_map(|(c, n)| std::iter::repeat_n(c, n).collect()),
        ]
    }

    #[test]
    fn an_excerpt_is_cut_on_a_character_boundary() {
        assert_eq!(excerpt("sonyflak"), "sonyflak");
        assert_eq!(excerpt(&"a".repeat(EXCERPT_CHARS)), "a".repeat(EXCERPT_CHARS));
        assert_eq!(excerpt(&"é".repeat(40)), format!("{}…", "é".repeat(EXCERPT_CHARS)));
        assert_eq!(excerpt(&"👍".repeat(EXCERPT_CHARS + 1)), format!("{}…", "👍".repeat(EXCERPT_CHARS)));
    }
}
