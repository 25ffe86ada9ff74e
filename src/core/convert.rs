//! Converting an existing key column to `DEFAULT snowflake_next()`, and back: the rules, as a
//! plan of DDL statements from facts about the column (`crate::api::convert` gathers the facts
//! from the catalogs and runs the plan).
//!
//! pgEdge's snowflake converts sequences too, and most of its bug reports are about that path: a
//! column default without a dependency on the extension, identity columns, a `MAXVALUE` that made
//! `pg_dump` restores fail, and Hibernate's block allocation. So the plan:
//! - sets the default with `ALTER TABLE … SET DEFAULT`, whose expression records its dependency
//!   on the function (`DROP EXTENSION` refuses while the default exists, and `pg_dump` orders the
//!   extension first);
//! - drops an identity with `DROP IDENTITY`, and for a serial column leaves its sequence alone
//!   unless asked to drop it: nothing here alters a sequence's bounds, so nothing can make a
//!   restore's `setval` fail;
//! - leaves existing ids as they are: they are far below any snowflake id (a sequence counts up
//!   from 1, a snowflake id carries milliseconds since the epoch in its top bits), so order and
//!   uniqueness hold;
//! - refuses what it cannot convert rather than guess: a column narrower than `bigint` (changing
//!   its type rewrites the table, the user's choice), a generated column, a default that is not a
//!   sequence's.

use std::fmt;

/// How a column gets its values now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `GENERATED ALWAYS AS IDENTITY` or `BY DEFAULT`; its sequence and that sequence's last value.
    Identity { always: bool, sequence: String, last_value: Option<i64> },
    /// `DEFAULT nextval(…)` (serial, bigserial): the sequence, and whether anything else depends
    /// on it.
    Sequence { sequence: String, used_elsewhere: bool },
    /// Already `DEFAULT snowflake_next()`.
    Converted,
    /// No default at all (the application supplies ids).
    Nothing,
    /// Some other default: its text.
    Other(String),
}

/// The facts about one column. Names are SQL text, already quoted (`format('%I')`, `regclass`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub table: String,
    pub column: String,
    /// `format_type` of the column.
    pub type_name: String,
    pub generated: bool,
    pub not_null: bool,
    pub source: Source,
}

/// Why a column is not converted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConvertError {
    /// Narrower (or other) than `bigint`.
    NotBigint {
        type_name: String,
    },
    Generated,
    /// A default that is not a sequence's.
    OtherDefault(String),
    /// The sequence to drop is also used by something else.
    SequenceShared {
        sequence: String,
    },
    /// The inverse needs `NOT NULL` for an identity.
    Nullable,
    /// The inverse of a column that is not `DEFAULT snowflake_next()`.
    NotConverted,
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConvertError::NotBigint { type_name } => write!(f, "the column is {type_name}, not bigint"),
            ConvertError::Generated => write!(f, "the column is a generated column"),
            ConvertError::OtherDefault(d) => write!(f, "the column's default is {d}, not a sequence's"),
            ConvertError::SequenceShared { sequence } => {
                write!(f, "the sequence {sequence} is also used by something other than this column")
            }
            ConvertError::Nullable => write!(f, "the column is not NOT NULL, which an identity needs"),
            ConvertError::NotConverted => write!(f, "the column's default is not snowflake_next()"),
        }
    }
}

/// The statements that switch `c` to `DEFAULT <generator>` (`generator` is the schema-qualified
/// call, such as `public.snowflake_next()`), dropping the sequence that served it only when
/// `drop_sequence`. An empty plan when it is converted already.
///
/// # Errors
/// [`ConvertError`] for a column this does not convert.
pub fn convert(c: &Column, generator: &str, drop_sequence: bool) -> Result<Vec<String>, ConvertError> {
    if c.generated {
        return Err(ConvertError::Generated);
    }
    if c.type_name != "bigint" {
        return Err(ConvertError::NotBigint { type_name: c.type_name.clone() });
    }
    let alter = format!("ALTER TABLE {} ALTER COLUMN {}", c.table, c.column);
    let set_default = format!("{alter} SET DEFAULT {generator}");
    Ok(match &c.source {
        Source::Converted => Vec::new(),
        Source::Nothing => vec![set_default],
        Source::Other(d) => return Err(ConvertError::OtherDefault(d.clone())),
        Source::Identity { sequence, last_value, .. } => {
            // DROP IDENTITY drops the identity's sequence with it; to keep one for applications
            // that call nextval() themselves, a plain sequence of the same name continues it.
            let mut plan = vec![format!("{alter} DROP IDENTITY"), set_default];
            if !drop_sequence {
                let start = last_value.map_or(1, |v| v.saturating_add(1));
                plan.push(format!(
                    "CREATE SEQUENCE {sequence} AS bigint START WITH {start} OWNED BY {}.{}",
                    c.table, c.column
                ));
            }
            plan
        }
        Source::Sequence { sequence, used_elsewhere } => {
            // Kept, the sequence stays as it is (owned by the column if it was), for applications
            // that call nextval() themselves. Dropped only if nothing else uses it: once the
            // default no longer names it, nothing here needs CASCADE.
            let mut plan = vec![set_default];
            if drop_sequence {
                if *used_elsewhere {
                    return Err(ConvertError::SequenceShared { sequence: sequence.clone() });
                }
                plan.push(format!("DROP SEQUENCE {sequence}"));
            }
            plan
        }
    })
}

/// The statements that give `c` back a sequence: an identity (`GENERATED BY DEFAULT`) that starts
/// at `start`, which the caller computes above every id the column holds and every id this
/// server may have handed out.
///
/// # Errors
/// [`ConvertError::NotConverted`] unless the column is `DEFAULT snowflake_next()`,
/// [`ConvertError::Nullable`] for a column an identity cannot have.
pub fn unconvert(c: &Column, start: i64) -> Result<Vec<String>, ConvertError> {
    if c.source != Source::Converted {
        return Err(ConvertError::NotConverted);
    }
    if !c.not_null {
        return Err(ConvertError::Nullable);
    }
    let alter = format!("ALTER TABLE {} ALTER COLUMN {}", c.table, c.column);
    Ok(vec![
        format!("{alter} DROP DEFAULT"),
        format!("{alter} ADD GENERATED BY DEFAULT AS IDENTITY (START WITH {start})"),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(source: Source) -> Column {
        Column {
            table: "public.orders".into(),
            column: "id".into(),
            type_name: "bigint".into(),
            generated: false,
            not_null: true,
            source,
        }
    }

    const G: &str = "public.snowflake_next()";

    #[test]
    fn bigserial() {
        let c = col(Source::Sequence { sequence: "public.orders_id_seq".into(), used_elsewhere: false });
        assert_eq!(
            convert(&c, G, false).unwrap(),
            vec!["ALTER TABLE public.orders ALTER COLUMN id SET DEFAULT public.snowflake_next()"]
        );
        assert_eq!(
            convert(&c, G, true).unwrap(),
            vec![
                "ALTER TABLE public.orders ALTER COLUMN id SET DEFAULT public.snowflake_next()",
                "DROP SEQUENCE public.orders_id_seq",
            ]
        );
        let shared = col(Source::Sequence { sequence: "s".into(), used_elsewhere: true });
        assert_eq!(convert(&shared, G, true), Err(ConvertError::SequenceShared { sequence: "s".into() }));
        assert!(convert(&shared, G, false).is_ok(), "kept, a shared sequence is no problem");
    }

    #[test]
    fn identity_always_and_by_default() {
        for always in [true, false] {
            let c = col(Source::Identity { always, sequence: "public.orders_id_seq".into(), last_value: Some(41) });
            assert_eq!(
                convert(&c, G, true).unwrap(),
                vec![
                    "ALTER TABLE public.orders ALTER COLUMN id DROP IDENTITY",
                    "ALTER TABLE public.orders ALTER COLUMN id SET DEFAULT public.snowflake_next()",
                ]
            );
            assert_eq!(
                convert(&c, G, false).unwrap()[2],
                "CREATE SEQUENCE public.orders_id_seq AS bigint START WITH 42 OWNED BY public.orders.id"
            );
        }
        let fresh = col(Source::Identity { always: true, sequence: "q".into(), last_value: None });
        assert!(convert(&fresh, G, false).unwrap()[2].contains("START WITH 1 "));
    }

    #[test]
    fn refusals_and_idempotence() {
        let int4 = Column { type_name: "integer".into(), ..col(Source::Nothing) };
        assert_eq!(convert(&int4, G, false), Err(ConvertError::NotBigint { type_name: "integer".into() }));
        assert_eq!(
            convert(&Column { generated: true, ..col(Source::Nothing) }, G, false),
            Err(ConvertError::Generated)
        );
        assert_eq!(convert(&col(Source::Other("42".into())), G, false), Err(ConvertError::OtherDefault("42".into())));
        assert_eq!(convert(&col(Source::Converted), G, true), Ok(vec![]), "converting twice is harmless");
        assert_eq!(convert(&col(Source::Nothing), G, false).unwrap().len(), 1);
    }

    #[test]
    fn the_inverse() {
        assert_eq!(
            unconvert(&col(Source::Converted), 900).unwrap(),
            vec![
                "ALTER TABLE public.orders ALTER COLUMN id DROP DEFAULT",
                "ALTER TABLE public.orders ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (START WITH 900)",
            ]
        );
        assert_eq!(unconvert(&col(Source::Nothing), 1), Err(ConvertError::NotConverted));
        assert_eq!(unconvert(&Column { not_null: false, ..col(Source::Converted) }, 1), Err(ConvertError::Nullable));
    }
}
