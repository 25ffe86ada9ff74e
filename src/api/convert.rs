//! Converting existing key columns (`crate::core::convert` for the rules):
//! `snowflake_convert(tbl, col, drop_sequence, dry_run)` switches a `bigserial`, `serial8` or
//! identity `bigint` column to `DEFAULT snowflake_next()`; `snowflake_unconvert(tbl, col,
//! dry_run)` gives it back an identity that starts above every id it holds.
//!
//! Both run their DDL in the caller's transaction, as the caller (so only the table's owner can),
//! and return the statements; with `dry_run` they only return them. VOLATILE (they change the
//! catalog) and PARALLEL UNSAFE (DDL).
//!
//! **Locks:** `ALTER TABLE … SET DEFAULT` and `DROP IDENTITY` take an `ACCESS EXCLUSIVE` lock on
//! the table, held to the end of the transaction, but rewrite nothing: the conversion is a
//! catalog change of a few milliseconds, and inserts from other sessions wait for it, then use the
//! new default. `SET lock_timeout` first on a busy table. The inverse locks the table before it
//! reads the largest id, so no insert can slip under the new identity's start.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::core::convert::{self, Column, ConvertError, Source};

fn refused(e: ConvertError, c: &Column) -> ErrorReport {
    let hint = match &e {
        ConvertError::NotBigint { .. } => format!(
            "A snowflake id needs 63 bits. Changing the type rewrites the table under an ACCESS EXCLUSIVE lock, so it is yours to choose: ALTER TABLE {} ALTER COLUMN {} TYPE bigint, then convert.",
            c.table, c.column
        ),
        ConvertError::SequenceShared { .. } => "Keep the sequence (drop_sequence => false), or first remove its other uses.".into(),
        ConvertError::Nullable => format!("ALTER TABLE {} ALTER COLUMN {} SET NOT NULL first.", c.table, c.column),
        ConvertError::OtherDefault(_) | ConvertError::Generated | ConvertError::NotConverted => {
            "Only a bigserial, serial8 or identity column is converted, and only a converted one back.".into()
        }
    };
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("cannot convert {}.{}", c.table, c.column),
        "snowflake_id",
    )
    .set_detail(sentence(&e.to_string()))
    .set_hint(hint)
}

/// "the column is …" as a DETAIL sentence.
fn sentence(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| format!("{}{}.", f.to_uppercase(), c.as_str()))
}

fn spi_error(e: pgrx::spi::SpiError) -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("snowflake_id catalog query: {e}"), "snowflake_id")
}

/// The facts about `tbl`.`col` from the catalogs, and the extension's schema, quoted.
fn column(tbl: pg_sys::Oid, col: &str) -> Result<(Column, String), ErrorReport> {
    let row = Spi::connect(|client| {
        let t = client.select(
            "SELECT format('%s', c.oid::regclass), quote_ident(a.attname), format_type(a.atttypid, a.atttypmod),
                    a.attgenerated <> '', a.attnotnull, a.attidentity::text,
                    pg_get_expr(ad.adbin, ad.adrelid),
                    -- the sequence a default or an identity takes its values from
                    (SELECT format('%s', s.oid::regclass) FROM pg_depend d JOIN pg_class s ON s.oid = d.refobjid AND s.relkind = 'S'
                     WHERE d.refclassid = 'pg_class'::regclass AND d.classid = 'pg_attrdef'::regclass
                       AND d.objid = ad.oid AND d.deptype = 'n'
                     LIMIT 1),
                    pg_get_serial_sequence(format('%s', c.oid::regclass), a.attname),
                    -- whether the default calls this extension's snowflake_next
                    EXISTS (SELECT 1 FROM pg_depend d JOIN pg_proc p ON p.oid = d.refobjid AND p.proname = 'snowflake_next'
                            JOIN pg_depend x ON x.classid = 'pg_proc'::regclass AND x.objid = p.oid AND x.deptype = 'e'
                            JOIN pg_extension e ON e.oid = x.refobjid AND e.extname = 'snowflake_id'
                            WHERE d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid AND d.refclassid = 'pg_proc'::regclass),
                    (SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'snowflake_id')
             FROM pg_class c
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2::name AND a.attnum > 0 AND NOT a.attisdropped
             LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
             WHERE c.oid = $1",
            Some(1),
            &[tbl.into(), col.to_owned().into()],
        )?;
        if t.is_empty() {
            return Ok(None);
        }
        let r = t.first();
        Ok(Some((
            r.get::<String>(1)?.unwrap_or_default(),
            r.get::<String>(2)?.unwrap_or_default(),
            r.get::<String>(3)?.unwrap_or_default(),
            r.get::<bool>(4)?.unwrap_or(false),
            r.get::<bool>(5)?.unwrap_or(false),
            r.get::<String>(6)?.unwrap_or_default(),
            r.get::<String>(7)?,
            r.get::<String>(8)?,
            r.get::<String>(9)?,
            r.get::<bool>(10)?.unwrap_or(false),
            r.get::<String>(11)?.unwrap_or_else(|| "public".into()),
        )))
    })
    .map_err(spi_error)?;
    let Some((
        table,
        column,
        type_name,
        generated,
        not_null,
        identity,
        default,
        default_seq,
        serial_seq,
        converted,
        schema,
    )) = row
    else {
        return Err(ErrorReport::new(
            PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
            format!("column \"{col}\" of the table does not exist"),
            "snowflake_id",
        ));
    };
    let source = if identity == "a" || identity == "d" {
        let sequence = serial_seq.unwrap_or_default();
        let last_value =
            Spi::get_one_with_args::<i64>("SELECT pg_sequence_last_value($1::regclass)", &[sequence.clone().into()])
                .map_err(spi_error)?;
        Source::Identity { always: identity == "a", sequence, last_value }
    } else if converted {
        Source::Converted
    } else if let Some(sequence) = default_seq {
        // Anything else that takes its values from the same sequence: another default.
        let used_elsewhere = Spi::get_one_with_args::<bool>(
            "SELECT EXISTS (SELECT 1 FROM pg_depend d
                            WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = $1::regclass
                              AND d.classid = 'pg_attrdef'::regclass AND d.deptype = 'n'
                              AND d.objid <> (SELECT ad.oid FROM pg_attrdef ad JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
                                              WHERE ad.adrelid = $2 AND a.attname = $3::name))",
            &[sequence.clone().into(), tbl.into(), col.to_owned().into()],
        )
        .map_err(spi_error)?
        .unwrap_or(true);
        Source::Sequence { sequence, used_elsewhere }
    } else {
        match default {
            None => Source::Nothing,
            Some(d) => Source::Other(d),
        }
    };
    Ok((Column { table, column, type_name, generated, not_null, source }, schema))
}

fn run(plan: Vec<String>, dry_run: bool) -> Result<SetOfIterator<'static, String>, ErrorReport> {
    if !dry_run {
        for stmt in &plan {
            Spi::run(stmt).map_err(spi_error)?;
        }
    }
    Ok(SetOfIterator::new(plan))
}

/// Switches a `bigserial`, `serial8` or identity `bigint` column to `DEFAULT snowflake_next()`,
/// keeping the ids it holds. Returns the DDL it ran (or, with `dry_run`, would run).
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn snowflake_convert(
    tbl: pg_sys::Oid,
    col: &std::ffi::CStr,
    drop_sequence: bool,
    dry_run: bool,
) -> Result<SetOfIterator<'static, String>, ErrorReport> {
    let (c, schema) = column(tbl, &col.to_string_lossy())?;
    let plan =
        convert::convert(&c, &format!("{schema}.snowflake_next()"), drop_sequence).map_err(|e| refused(e, &c))?;
    run(plan, dry_run)
}

/// Gives a converted column back an identity (`GENERATED BY DEFAULT`) that starts above every id
/// it holds and every id this server's generators may have handed out.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn snowflake_unconvert(
    tbl: pg_sys::Oid,
    col: &std::ffi::CStr,
    dry_run: bool,
) -> Result<SetOfIterator<'static, String>, ErrorReport> {
    let (c, schema) = column(tbl, &col.to_string_lossy())?;
    if c.source != Source::Converted {
        return Err(refused(ConvertError::NotConverted, &c));
    }
    if !dry_run {
        Spi::run(&format!("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE", c.table)).map_err(spi_error)?;
    }
    // Above the largest stored id, and above every id the reservation covers (ids handed out by
    // SELECT snowflake_next() that were never stored).
    let start = Spi::get_one::<i64>(&format!(
        "SELECT greatest(coalesce((SELECT max({col}) FROM {tbl}), 0),
                         (SELECT {schema}.snowflake_max_id(reserved_until) FROM {schema}.snowflake_id_reservation())) + 1",
        col = c.column,
        tbl = c.table
    ))
    .map_err(spi_error)?
    .unwrap_or(1);
    let plan = convert::unconvert(&c, start).map_err(|e| refused(e, &c))?;
    run(plan, dry_run)
}

extension_sql!(
    r#"
CREATE FUNCTION snowflake_convert(tbl regclass, col name, drop_sequence boolean DEFAULT false, dry_run boolean DEFAULT false)
RETURNS SETOF text
LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'snowflake_convert_wrapper';
CREATE FUNCTION snowflake_unconvert(tbl regclass, col name, dry_run boolean DEFAULT false)
RETURNS SETOF text
LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'snowflake_unconvert_wrapper';
"#,
    name = "convert",
);
