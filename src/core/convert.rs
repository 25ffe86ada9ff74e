//! Converting an existing key column to `DEFAULT snowflake_next()`, and back: the rules, as a
//! plan of DDL statements from facts about the column, and what the plan must have done once it
//! ran (`crate::runtime::convert` gathers the facts from the catalogs, under an `ACCESS EXCLUSIVE`
//! lock, runs the plan, and reads its effects by OID).
//!
//! pgEdge's snowflake converts sequences too, and the failures reported against that path are:
//! a column default without a recorded dependency on the extension, identity columns, a
//! `MAXVALUE` that made `pg_dump` restores fail, and Hibernate's block allocation. So the plan:
//! - sets the default with `ALTER TABLE … SET DEFAULT`, whose expression records its dependency
//!   on the function (`DROP EXTENSION` refuses while the default exists, and `pg_dump` orders the
//!   extension first);
//! - drops an identity with `DROP IDENTITY`, and for a serial column leaves its sequence alone
//!   unless asked to drop it: nothing here alters a kept sequence's bounds, so nothing can make a
//!   restore's `setval` fail;
//! - keeps existing ids as they are, and checks that they lie below every snowflake id the server
//!   will mint (a sequence counts up from 1, a snowflake id carries milliseconds since the epoch
//!   in its top bits; ids a table got from elsewhere may not), so order and uniqueness hold;
//! - refuses what it cannot convert rather than guess: not a table, a caller who is not its
//!   owner, a column narrower than `bigint` (changing its type rewrites the table, the user's
//!   choice), a generated column, a default that is not exactly `nextval(<its sequence>)`, a tree
//!   with a foreign partition, one the caller does not own or one with a default of its own (the
//!   DDL recurses to them); and drops only a sequence that is the column's own and that nothing
//!   recorded uses.

use std::fmt;

/// A sequence as the catalogs describe it, for continuing it under another name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sequence {
    /// Its name, qualified and quoted.
    pub name: String,
    /// The last value it handed out (`None` before the first, or when the caller may not read it).
    pub last_value: Option<i64>,
    /// Its `START WITH`: the first value, while `last_value` is `None`.
    pub start: i64,
    pub increment: i64,
    pub cache: i64,
    /// Its privileges granted to roles other than its owner.
    pub grants: Vec<Grant>,
}

/// One privilege on a sequence, as `aclexplode` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// `USAGE`, `SELECT` or `UPDATE`.
    pub privilege: String,
    /// The role, quoted, or `PUBLIC`.
    pub grantee: String,
    pub grant_option: bool,
}

/// How a column gets its values now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `GENERATED ALWAYS AS IDENTITY` or `BY DEFAULT`, its sequence, and whether anything the
    /// catalogs record (another table's default, a view) uses that sequence, which would make
    /// `DROP IDENTITY` fail.
    Identity { always: bool, sequence: Sequence, used_elsewhere: bool },
    /// `DEFAULT nextval(…)` (serial, bigserial): the sequence, whether it is `OWNED BY` this
    /// column (a serial's is), and whether anything else the catalogs record (another table's
    /// default, a view, a function's SQL body) depends on it.
    Sequence { sequence: String, owned: bool, used_elsewhere: bool },
    /// Already `DEFAULT snowflake_next()` (this extension's, with or without a shard).
    Converted,
    /// No default at all (the application supplies ids).
    Nothing,
    /// Some other default: its text.
    Other(String),
}

/// The facts about one column. Names are SQL text, already quoted and qualified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub table: String,
    pub column: String,
    /// The table's owner, quoted.
    pub owner: String,
    /// A plain or partitioned table (not a view, a foreign table, a sequence…).
    pub is_table: bool,
    /// The caller has the owner's privileges (is it, a member of it, or a superuser).
    pub may_alter: bool,
    /// `format_type` of the column.
    pub type_name: String,
    pub generated: bool,
    pub not_null: bool,
    /// The table is partitioned, has inheritance children, or is a partition or a child.
    pub in_hierarchy: bool,
    /// The caller may create objects in the table's schema (a kept identity's continuation is a
    /// new sequence there).
    pub may_create: bool,
    /// The partitions and inheritance children, at every level: `SET DEFAULT` and `DROP
    /// IDENTITY` recurse to them.
    pub descendants: Vec<Descendant>,
    pub source: Source,
}

/// A partition or inheritance child of the table, at any level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descendant {
    /// Its name, qualified and quoted.
    pub table: String,
    /// A foreign table: its rows live elsewhere, beyond the lock and the check of stored ids.
    pub foreign: bool,
    /// The caller has its owner's privileges (the recursing DDL needs them).
    pub may_alter: bool,
    /// Its own default for the column, when it is neither the table's default nor this
    /// extension's generator (the glue compares them): `SET DEFAULT` would replace it unseen.
    pub other_default: Option<String>,
}

/// Whether a default's text (`pg_get_expr` under `search_path = pg_catalog, pg_temp`) is exactly
/// a call of this extension's generator: `snowflake_next()` or `snowflake_next(<shard>)` after
/// `prefix`, the extension's schema quoted and followed by a dot (empty for `pg_catalog`, which
/// `pg_get_expr` does not print). Anything more (`snowflake_next() + 1`, a `coalesce`) is some
/// other default, which the inverse does not take apart.
#[must_use]
pub fn is_generator_call(default: &str, prefix: &str) -> bool {
    default
        .strip_prefix(prefix)
        .and_then(|d| d.strip_prefix("snowflake_next("))
        .and_then(|d| d.strip_suffix(')'))
        .is_some_and(|arg| arg.is_empty() || (arg.len() <= 5 && arg.bytes().all(|b| b.is_ascii_digit())))
}

/// Why a column is not converted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConvertError {
    NotATable,
    NotOwner,
    /// Narrower (or other) than `bigint`.
    NotBigint {
        type_name: String,
    },
    Generated,
    /// A default that is not a sequence's.
    OtherDefault(String),
    /// The sequence to drop is not the column's own (`OWNED BY` it): code the catalogs do not
    /// record (PL/pgSQL, applications) may use it.
    SequenceNotOwned {
        sequence: String,
    },
    /// The sequence to drop is also used by something else.
    SequenceShared {
        sequence: String,
    },
    /// The identity's sequence is also used by something else: `DROP IDENTITY` would fail.
    IdentityShared {
        sequence: String,
    },
    /// Keeping an identity's sequence creates one in the table's schema, where the caller may not.
    CannotCreate {
        sequence: String,
    },
    /// A partition or child is a foreign table.
    ForeignDescendant {
        table: String,
    },
    /// The caller does not own a partition or child.
    DescendantNotOwned {
        table: String,
    },
    /// A partition or child has a default of its own.
    DescendantDefault {
        table: String,
        default: String,
    },
    /// A descending identity cannot be continued by counting up.
    Descending {
        sequence: String,
    },
    /// Stored ids reach the first snowflake id the server would mint.
    IdsAboveSnowflake {
        max: i64,
        first: i64,
    },
    /// The inverse needs `NOT NULL` for an identity.
    Nullable,
    /// The inverse of a table with partitions or children, or of one: `DROP DEFAULT` recurses
    /// to the children but an identity does not (before PostgreSQL 17, not even to partitions),
    /// and a partition's identity would meet the ids its parent's default still mints.
    InHierarchy,
    /// The inverse of a column that is not `DEFAULT snowflake_next()`.
    NotConverted,
    /// The plan ran, but its effect on the column, read by OID, is not there: one of its
    /// statements, which name the table and its objects, acted on another object.
    NotApplied(Missing),
}

/// What a plan that ran did not do to the column it was made for ([`check_converted`],
/// [`check_unconverted`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Its default is not the generator.
    Default,
    /// The sequence the plan dropped (the identity's, or a serial's with `drop_sequence`) is still
    /// there.
    SequenceLeft { sequence: String },
    /// No new sequence continuing the identity, with its grants, is `OWNED BY` the column.
    Continuation { sequence: String },
    /// The inverse: the column is not an identity.
    Identity,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Default => write!(f, "the column's default is not snowflake_next()"),
            Missing::SequenceLeft { sequence } => write!(f, "the sequence {sequence} it dropped is still there"),
            Missing::Continuation { sequence } => {
                write!(f, "no new sequence {sequence} with the identity's grants is owned by the column")
            }
            Missing::Identity => write!(f, "the column is not an identity"),
        }
    }
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConvertError::NotATable => write!(f, "it is not a table's column (a view, a foreign table…)"),
            ConvertError::NotOwner => write!(f, "only the table's owner may convert its columns"),
            ConvertError::NotBigint { type_name } => write!(f, "the column is {type_name}, not bigint"),
            ConvertError::Generated => write!(f, "the column is a generated column"),
            ConvertError::OtherDefault(d) => write!(f, "the column's default is {d}, not nextval() of a sequence"),
            ConvertError::SequenceNotOwned { sequence } => {
                write!(
                    f,
                    "the sequence {sequence} is not owned by the column, so code the catalogs do not record may \
                    use it"
                )
            }
            ConvertError::SequenceShared { sequence } => {
                write!(f, "the sequence {sequence} is also used by another column's default or by a view")
            }
            ConvertError::IdentityShared { sequence } => write!(
                f,
                "the identity sequence {sequence} is also used by another column's default or by a view, so DROP \
                    IDENTITY would fail"
            ),
            ConvertError::CannotCreate { sequence } => write!(
                f,
                "keeping the identity sequence {sequence} means creating it again, and the caller may not create \
                    objects in its schema"
            ),
            ConvertError::ForeignDescendant { table } => {
                write!(
                    f,
                    "its partition or child {table} is a foreign table, whose rows this server cannot lock or \
                    check"
                )
            }
            ConvertError::DescendantNotOwned { table } => {
                write!(f, "the caller does not own its partition or child {table}, which the change would alter too")
            }
            ConvertError::DescendantDefault { table, default } => write!(
                f,
                "its partition or child {table} has a default of its own ({default}), which the change would replace"
            ),
            ConvertError::Descending { sequence } => write!(f, "the identity sequence {sequence} counts down"),
            ConvertError::IdsAboveSnowflake { max, first } => write!(
                f,
                "the column holds ids up to {max}, at or above {first}, the next snowflake id: new ids would not sort \
                    after them, and could meet them"
            ),
            ConvertError::Nullable => write!(f, "the column is not NOT NULL, which an identity needs"),
            ConvertError::InHierarchy => {
                write!(
                    f,
                    "the table is partitioned, has inheritance children, or is a partition or a child, and one \
                    identity would not cover the tree"
                )
            }
            ConvertError::NotConverted => write!(f, "the column's default is not snowflake_next()"),
            ConvertError::NotApplied(missing) => write!(
                f,
                "after its statements ran, {missing}: one of them acted on another object, a name having been made \
                    to point elsewhere while they ran (a schema renamed)"
            ),
        }
    }
}

/// The checks every plan starts with.
fn check_column(c: &Column) -> Result<(), ConvertError> {
    if !c.is_table {
        return Err(ConvertError::NotATable);
    }
    if !c.may_alter {
        return Err(ConvertError::NotOwner);
    }
    if c.generated {
        return Err(ConvertError::Generated);
    }
    if c.type_name != "bigint" {
        return Err(ConvertError::NotBigint { type_name: c.type_name.clone() });
    }
    Ok(())
}

/// Whether the column's facts allow a conversion, before any of its rows are read: the glue
/// checks this, then locks the table and reads the largest id.
///
/// # Errors
/// [`ConvertError`] for a column this does not convert.
pub fn check_convert(c: &Column) -> Result<(), ConvertError> {
    check_column(c)?;
    match &c.source {
        Source::Other(d) => return Err(ConvertError::OtherDefault(d.clone())),
        Source::Identity { sequence, used_elsewhere: true, .. } => {
            return Err(ConvertError::IdentityShared { sequence: sequence.name.clone() })
        }
        Source::Converted => return Ok(()),
        _ => {}
    }
    for d in &c.descendants {
        if d.foreign {
            return Err(ConvertError::ForeignDescendant { table: d.table.clone() });
        }
        if !d.may_alter {
            return Err(ConvertError::DescendantNotOwned { table: d.table.clone() });
        }
        if let Some(default) = &d.other_default {
            return Err(ConvertError::DescendantDefault { table: d.table.clone(), default: default.clone() });
        }
    }
    Ok(())
}

/// The statements that switch `c` to `DEFAULT <generator>` (`generator` is the schema-qualified
/// call, such as `public.snowflake_next()`), dropping the sequence that served it only when
/// `drop_sequence`. `max_id` is the largest id the column holds and `first_id` an id the server
/// just minted: every stored id must be below it. An empty plan when it is converted already.
///
/// # Errors
/// [`ConvertError`] for a column this does not convert.
pub fn convert(
    c: &Column,
    generator: &str,
    drop_sequence: bool,
    max_id: Option<i64>,
    first_id: i64,
) -> Result<Vec<String>, ConvertError> {
    check_convert(c)?;
    if c.source == Source::Converted {
        return Ok(Vec::new());
    }
    if let Some(max) = max_id.filter(|&m| m >= first_id) {
        return Err(ConvertError::IdsAboveSnowflake { max, first: first_id });
    }
    let alter = format!("ALTER TABLE {} ALTER COLUMN {}", c.table, c.column);
    let set_default = format!("{alter} SET DEFAULT {generator}");
    Ok(match &c.source {
        Source::Converted | Source::Other(_) => unreachable!("handled above"),
        Source::Nothing => vec![set_default],
        Source::Identity { sequence: s, .. } => {
            // DROP IDENTITY drops the identity's sequence with it. To keep one for applications
            // that call nextval() themselves, a plain sequence of the same name, owner, step,
            // cache and grants continues it, above both its last value and every stored id.
            // The continuation has the default bounds: its start may lie above the identity's
            // MAXVALUE, and it must never cycle back below the stored ids.
            let mut plan = vec![format!("{alter} DROP IDENTITY"), set_default];
            if !drop_sequence {
                if s.increment < 0 {
                    return Err(ConvertError::Descending { sequence: s.name.clone() });
                }
                if !c.may_create {
                    return Err(ConvertError::CannotCreate { sequence: s.name.clone() });
                }
                let (step, start) = (s.increment.max(1), continuation_start(s, max_id));
                plan.push(format!(
                    "CREATE SEQUENCE {} AS bigint INCREMENT BY {step} CACHE {} START WITH {start}",
                    s.name,
                    s.cache.max(1)
                ));
                plan.push(format!("ALTER SEQUENCE {} OWNER TO {}", s.name, c.owner));
                plan.push(format!("ALTER SEQUENCE {} OWNED BY {}.{}", s.name, c.table, c.column));
                plan.extend(s.grants.iter().map(|g| {
                    let option = if g.grant_option { " WITH GRANT OPTION" } else { "" };
                    format!("GRANT {} ON SEQUENCE {} TO {}{option}", g.privilege, s.name, g.grantee)
                }));
            }
            plan
        }
        Source::Sequence { sequence, owned, used_elsewhere } => {
            // Kept, the sequence stays as it is (owned by the column if it was), for applications
            // that call nextval() themselves. Dropped only if it is the column's own and nothing
            // else uses it: once the default no longer names it, nothing here needs CASCADE.
            let mut plan = vec![set_default];
            if drop_sequence {
                if !*owned {
                    return Err(ConvertError::SequenceNotOwned { sequence: sequence.clone() });
                }
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
/// [`ConvertError`]: not a table's `bigint` column the caller owns, not `DEFAULT
/// snowflake_next()`, or a column an identity cannot have.
pub fn unconvert(c: &Column, start: i64) -> Result<Vec<String>, ConvertError> {
    check_unconvert(c)?;
    let alter = format!("ALTER TABLE {} ALTER COLUMN {}", c.table, c.column);
    Ok(vec![
        format!("{alter} DROP DEFAULT"),
        format!("{alter} ADD GENERATED BY DEFAULT AS IDENTITY (START WITH {start})"),
    ])
}

/// Whether the inverse applies, before any row is read.
///
/// # Errors
/// As [`unconvert`].
pub fn check_unconvert(c: &Column) -> Result<(), ConvertError> {
    check_column(c)?;
    if c.source != Source::Converted {
        return Err(ConvertError::NotConverted);
    }
    if !c.not_null {
        return Err(ConvertError::Nullable);
    }
    if c.in_hierarchy {
        return Err(ConvertError::InHierarchy);
    }
    Ok(())
}

/// What a plan's statements did to the column, read by OID once they ran ([`check_converted`],
/// [`check_unconverted`]). The statements name the table and its objects, and a name can be made
/// to point elsewhere between two of them without any lock the conversion holds (`ALTER SCHEMA
/// ... RENAME` locks none of the tables in the schema): then a statement acts on another object,
/// and only its effects on the column's own objects, by OID, show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// How the column gets its values now.
    pub source: Source,
    /// Whether the sequence the column used before (its identity's or its default's) still exists.
    pub sequence_left: bool,
    /// Each sequence `OWNED BY` the column now that was not before.
    pub new_owned: Vec<Owned>,
}

/// A sequence newly `OWNED BY` the column: its grants, and what it gives next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    pub grants: Vec<Grant>,
    pub start: i64,
    pub increment: i64,
    pub last_value: Option<i64>,
}

impl Owned {
    /// Whether it continues the identity `s` over stored ids up to `max_id`: its grants, and
    /// nothing below where the continuation starts.
    fn continues(&self, s: &Sequence, max_id: Option<i64>) -> bool {
        let start = continuation_start(s, max_id);
        s.grants.iter().all(|p| self.grants.contains(p))
            && self.increment >= 1
            && self.start >= start
            && self.last_value.is_none_or(|v| v >= start)
    }
}

/// Where a kept identity's continuation starts: above both its last value and every stored id
/// (`max_id`), and at least 1, the default MINVALUE (above stored ids that are all negative too).
pub fn continuation_start(s: &Sequence, max_id: Option<i64>) -> i64 {
    let step = s.increment.max(1);
    let next = s.last_value.map_or(s.start, |last| last.saturating_add(step));
    next.max(max_id.map_or(1, |m| m.saturating_add(step))).max(1)
}

/// Whether the plan of [`convert`] for `before` (with `drop_sequence`, over stored ids up to
/// `max_id`) did what it says: the column's default is the generator, the sequence it dropped is
/// gone, and a kept identity's continuation is a new sequence `OWNED BY` the column that has the
/// identity's grants (it may have more: the creating role's default privileges) and gives nothing
/// below its start (a sequence put in its place, adopted by a statement that acted on another
/// name, could).
///
/// # Errors
/// [`ConvertError::NotApplied`] with the first effect that is missing.
pub fn check_converted(
    before: &Column,
    drop_sequence: bool,
    max_id: Option<i64>,
    after: &Outcome,
) -> Result<(), ConvertError> {
    let missing = if after.source != Source::Converted {
        Some(Missing::Default)
    } else {
        match &before.source {
            Source::Identity { sequence: s, .. } if after.sequence_left => {
                Some(Missing::SequenceLeft { sequence: s.name.clone() })
            }
            Source::Identity { sequence: s, .. }
                if !drop_sequence && !after.new_owned.iter().any(|n| n.continues(s, max_id)) =>
            {
                Some(Missing::Continuation { sequence: s.name.clone() })
            }
            Source::Sequence { sequence, .. } if drop_sequence && after.sequence_left => {
                Some(Missing::SequenceLeft { sequence: sequence.clone() })
            }
            _ => None,
        }
    };
    missing.map_or(Ok(()), |m| Err(ConvertError::NotApplied(m)))
}

/// Whether the plan of [`unconvert`] did what it says: the column is an identity (`GENERATED BY
/// DEFAULT`).
///
/// # Errors
/// [`ConvertError::NotApplied`] when it is not.
pub fn check_unconverted(after: &Outcome) -> Result<(), ConvertError> {
    match after.source {
        Source::Identity { always: false, .. } => Ok(()),
        _ => Err(ConvertError::NotApplied(Missing::Identity)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(source: Source) -> Column {
        Column {
            table: "public.orders".into(),
            column: "id".into(),
            owner: "app".into(),
            is_table: true,
            may_alter: true,
            type_name: "bigint".into(),
            generated: false,
            not_null: true,
            in_hierarchy: false,
            may_create: true,
            descendants: Vec::new(),
            source,
        }
    }

    fn identity(last_value: Option<i64>, increment: i64) -> Source {
        Source::Identity {
            always: true,
            sequence: Sequence {
                name: "public.orders_id_seq".into(),
                last_value,
                start: 1,
                increment,
                cache: 20,
                grants: vec![
                    Grant { privilege: "USAGE".into(), grantee: "reader".into(), grant_option: true },
                    Grant { privilege: "SELECT".into(), grantee: "PUBLIC".into(), grant_option: false },
                ],
            },
            used_elsewhere: false,
        }
    }

    const G: &str = "public.snowflake_next()";
    const FIRST: i64 = 250_000_000_000_000_000;

    #[test]
    fn bigserial() {
        let c = col(Source::Sequence { sequence: "public.orders_id_seq".into(), owned: true, used_elsewhere: false });
        assert_eq!(
            convert(&c, G, false, Some(100), FIRST).unwrap(),
            vec!["ALTER TABLE public.orders ALTER COLUMN id SET DEFAULT public.snowflake_next()"]
        );
        assert_eq!(
            convert(&c, G, true, Some(100), FIRST).unwrap(),
            vec![
                "ALTER TABLE public.orders ALTER COLUMN id SET DEFAULT public.snowflake_next()",
                "DROP SEQUENCE public.orders_id_seq",
            ]
        );
        let shared = col(Source::Sequence { sequence: "s".into(), owned: true, used_elsewhere: true });
        assert_eq!(convert(&shared, G, true, None, FIRST), Err(ConvertError::SequenceShared { sequence: "s".into() }));
        assert!(convert(&shared, G, false, None, FIRST).is_ok(), "kept, a shared sequence is no problem");
        let foreign = col(Source::Sequence { sequence: "billing.seq".into(), owned: false, used_elsewhere: false });
        assert_eq!(
            convert(&foreign, G, true, None, FIRST),
            Err(ConvertError::SequenceNotOwned { sequence: "billing.seq".into() })
        );
        assert!(convert(&foreign, G, false, None, FIRST).is_ok());
    }

    #[test]
    fn identity_continued_above_its_last_value_and_every_stored_id() {
        for always in [true, false] {
            let mut c = col(identity(Some(41), 50));
            if let Source::Identity { always: a, .. } = &mut c.source {
                *a = always;
            }
            assert_eq!(
                convert(&c, G, true, Some(41), FIRST).unwrap(),
                vec![
                    "ALTER TABLE public.orders ALTER COLUMN id DROP IDENTITY",
                    "ALTER TABLE public.orders ALTER COLUMN id SET DEFAULT public.snowflake_next()",
                ]
            );
            // An explicit id of 5,000 in a BY DEFAULT column: the continuation starts above it.
            assert_eq!(
                convert(&c, G, false, Some(5_000), FIRST).unwrap()[2..],
                [
                    "CREATE SEQUENCE public.orders_id_seq AS bigint INCREMENT BY 50 CACHE 20 START WITH 5050",
                    "ALTER SEQUENCE public.orders_id_seq OWNER TO app",
                    "ALTER SEQUENCE public.orders_id_seq OWNED BY public.orders.id",
                    "GRANT USAGE ON SEQUENCE public.orders_id_seq TO reader WITH GRANT OPTION",
                    "GRANT SELECT ON SEQUENCE public.orders_id_seq TO PUBLIC",
                ]
            );
        }
        let fresh = col(identity(None, 1));
        assert!(convert(&fresh, G, false, None, FIRST).unwrap()[2].ends_with("START WITH 1"));
        // An identity declared START WITH 1000000 that never handed out a value continues there.
        let mut unused = col(identity(None, 1));
        if let Source::Identity { sequence, .. } = &mut unused.source {
            sequence.start = 1_000_000;
        }
        assert!(convert(&unused, G, false, Some(5), FIRST).unwrap()[2].ends_with("START WITH 1000000"));
        assert!(convert(&unused, G, false, Some(2_000_000), FIRST).unwrap()[2].ends_with("START WITH 2000001"));
        assert_eq!(
            convert(&col(identity(Some(-5), -1)), G, false, None, FIRST),
            Err(ConvertError::Descending { sequence: "public.orders_id_seq".into() })
        );
        assert!(
            convert(&col(identity(Some(-5), -1)), G, true, None, FIRST).is_ok(),
            "dropped, direction does not matter"
        );
        // Never below 1 (the continuation's MINVALUE), even over negative ids or a negative START.
        let mut negative = col(identity(None, 1));
        if let Source::Identity { sequence, .. } = &mut negative.source {
            sequence.start = -9;
        }
        assert!(convert(&negative, G, false, None, FIRST).unwrap()[2].ends_with("START WITH 1"));
        assert!(convert(&negative, G, false, Some(-3), FIRST).unwrap()[2].ends_with("START WITH 1"));
        // Keeping it needs CREATE on the schema; dropping it does not.
        let no_create = Column { may_create: false, ..col(identity(Some(41), 1)) };
        assert_eq!(
            convert(&no_create, G, false, None, FIRST),
            Err(ConvertError::CannotCreate { sequence: "public.orders_id_seq".into() })
        );
        assert!(convert(&no_create, G, true, None, FIRST).is_ok());
        // An identity sequence something else uses: DROP IDENTITY would fail, kept or not.
        let mut shared = col(identity(Some(41), 1));
        if let Source::Identity { used_elsewhere, .. } = &mut shared.source {
            *used_elsewhere = true;
        }
        for drop_sequence in [false, true] {
            assert_eq!(
                convert(&shared, G, drop_sequence, None, FIRST),
                Err(ConvertError::IdentityShared { sequence: "public.orders_id_seq".into() })
            );
        }
    }

    #[test]
    fn descendants() {
        let part = |foreign, may_alter, other_default: Option<&str>| Descendant {
            table: "public.orders_2026".into(),
            foreign,
            may_alter,
            other_default: other_default.map(Into::into),
        };
        let tree = |d| Column {
            in_hierarchy: true,
            descendants: vec![part(false, true, None), d],
            ..col(Source::Sequence { sequence: "public.orders_id_seq".into(), owned: true, used_elsewhere: false })
        };
        assert!(check_convert(&tree(part(false, true, None))).is_ok());
        let t = "public.orders_2026".to_owned();
        assert_eq!(
            check_convert(&tree(part(true, true, None))),
            Err(ConvertError::ForeignDescendant { table: t.clone() })
        );
        assert_eq!(
            check_convert(&tree(part(false, false, None))),
            Err(ConvertError::DescendantNotOwned { table: t.clone() })
        );
        assert_eq!(
            check_convert(&tree(part(false, true, Some("42")))),
            Err(ConvertError::DescendantDefault { table: t, default: "42".into() })
        );
        assert!(
            check_convert(&Column { source: Source::Converted, ..tree(part(true, false, Some("42"))) }).is_ok(),
            "a converted table is left alone"
        );
    }

    #[test]
    fn refusals_and_idempotence() {
        let int4 = Column { type_name: "integer".into(), ..col(Source::Nothing) };
        assert_eq!(convert(&int4, G, false, None, FIRST), Err(ConvertError::NotBigint { type_name: "integer".into() }));
        assert_eq!(
            convert(&Column { generated: true, ..col(Source::Nothing) }, G, false, None, FIRST),
            Err(ConvertError::Generated)
        );
        assert_eq!(
            convert(&Column { is_table: false, ..col(Source::Nothing) }, G, false, None, FIRST),
            Err(ConvertError::NotATable)
        );
        assert_eq!(
            convert(&Column { may_alter: false, ..col(Source::Nothing) }, G, false, None, FIRST),
            Err(ConvertError::NotOwner)
        );
        assert_eq!(check_convert(&col(Source::Other("42".into()))), Err(ConvertError::OtherDefault("42".into())));
        assert_eq!(
            convert(&col(Source::Converted), G, true, Some(FIRST + 5), FIRST),
            Ok(vec![]),
            "converting twice is harmless"
        );
        assert_eq!(convert(&col(Source::Nothing), G, false, None, FIRST).unwrap().len(), 1);
        // Stored ids at or above the next snowflake id (ids from another generator, a sequence
        // set high): refused, whatever the source.
        assert_eq!(
            convert(&col(Source::Nothing), G, false, Some(FIRST), FIRST),
            Err(ConvertError::IdsAboveSnowflake { max: FIRST, first: FIRST })
        );
        assert!(convert(&col(Source::Nothing), G, false, Some(FIRST - 1), FIRST).is_ok());
    }

    #[test]
    fn generator_calls() {
        assert!(is_generator_call("public.snowflake_next()", "public."));
        assert!(is_generator_call("ids.snowflake_next(7)", "ids."));
        assert!(is_generator_call("\"my ids\".snowflake_next(8191)", "\"my ids\"."));
        assert!(is_generator_call("snowflake_next()", ""), "installed in pg_catalog");
        for other in [
            "public.snowflake_next() + 1",
            "COALESCE(public.snowflake_next(), 0)",
            "other.snowflake_next()",
            "public.snowflake_next_uuid()",
            "public.snowflake_next(-1)",
            "public.snowflake_next(1 + 2)",
            "snowflake_next()",
        ] {
            assert!(!is_generator_call(other, "public."), "{other}");
        }
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
        assert_eq!(
            check_unconvert(&Column { is_table: false, ..col(Source::Converted) }),
            Err(ConvertError::NotATable)
        );
        assert_eq!(
            check_unconvert(&Column { in_hierarchy: true, ..col(Source::Converted) }),
            Err(ConvertError::InHierarchy)
        );
        assert!(
            check_convert(&Column { in_hierarchy: true, ..col(Source::Converted) }).is_ok(),
            "converting a tree is fine"
        );
    }

    #[test]
    fn effects_checked_after_the_plan() {
        let done = |sequence_left, new_owned| Outcome { source: Source::Converted, sequence_left, new_owned };
        let missing = |m| Err(ConvertError::NotApplied(m));
        let seq = "public.orders_id_seq".to_owned();
        // A serial column: the default, and the sequence gone only if it was dropped.
        let serial = col(Source::Sequence { sequence: seq.clone(), owned: true, used_elsewhere: false });
        assert!(check_converted(&serial, false, None, &done(true, vec![])).is_ok());
        assert!(check_converted(&serial, true, None, &done(false, vec![])).is_ok());
        assert_eq!(
            check_converted(&serial, true, None, &done(true, vec![])),
            missing(Missing::SequenceLeft { sequence: seq.clone() })
        );
        // SET DEFAULT that hit another table: the column still has its old source.
        let not_done = Outcome { source: serial.source.clone(), sequence_left: true, new_owned: vec![] };
        assert_eq!(check_converted(&serial, false, None, &not_done), missing(Missing::Default));
        assert_eq!(check_converted(&col(Source::Nothing), false, None, &not_done), missing(Missing::Default));
        assert!(check_converted(&col(Source::Nothing), false, None, &done(false, vec![])).is_ok());
        // An identity: always dropped; kept, a new owned sequence with at least its grants, that
        // gives nothing below the continuation's start (above its last value 41 and the stored 57).
        let ident = col(identity(Some(41), 1));
        let Source::Identity { sequence, .. } = &ident.source else { unreachable!() };
        let (grants, start) = (sequence.grants.clone(), continuation_start(sequence, Some(57)));
        assert_eq!(start, 58);
        let owned = |grants: Vec<Grant>, start, last_value| Owned { grants, start, increment: 1, last_value };
        let ok = owned(grants.clone(), 58, None);
        assert!(check_converted(&ident, true, Some(57), &done(false, vec![])).is_ok());
        assert_eq!(
            check_converted(&ident, true, Some(57), &done(true, vec![])),
            missing(Missing::SequenceLeft { sequence: seq.clone() })
        );
        assert!(check_converted(&ident, false, Some(57), &done(false, vec![ok.clone()])).is_ok());
        let mut more = grants.clone();
        more.push(Grant { privilege: "UPDATE".into(), grantee: "defaults".into(), grant_option: false });
        assert!(
            check_converted(
                &ident,
                false,
                Some(57),
                &done(false, vec![owned(vec![], 58, None), owned(more, 58, None)])
            )
            .is_ok(),
            "default privileges too"
        );
        for (what, new_owned) in [
            ("the continuation went elsewhere", vec![]),
            ("a grant went elsewhere", vec![owned(grants[..1].to_vec(), 58, None)]),
            ("a sequence put in its place starts below", vec![owned(grants.clone(), 1, None)]),
            ("a sequence put in its place was called below", vec![owned(grants.clone(), 58, Some(3))]),
            ("a sequence put in its place counts down", vec![Owned { increment: -1, ..ok.clone() }]),
        ] {
            assert_eq!(
                check_converted(&ident, false, Some(57), &done(false, new_owned)),
                missing(Missing::Continuation { sequence: seq.clone() }),
                "{what}"
            );
        }
        // The inverse.
        let back = |source| Outcome { source, sequence_left: false, new_owned: vec![] };
        let by_default = match identity(None, 1) {
            Source::Identity { sequence, used_elsewhere, .. } => {
                Source::Identity { always: false, sequence, used_elsewhere }
            }
            _ => unreachable!(),
        };
        assert!(check_unconverted(&back(by_default)).is_ok());
        assert_eq!(check_unconverted(&back(Source::Nothing)), missing(Missing::Identity));
        assert_eq!(check_unconverted(&back(Source::Converted)), missing(Missing::Identity));
    }
}
