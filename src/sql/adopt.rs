//! `snowflake_adopt`: switches an existing serial / bigserial / identity / sequence-default key
//! column to `DEFAULT snowflake_nextval()`, with ordinary DDL only.
//!
//! Written in Rust over SPI rather than PL/pgSQL so that its refusals are the extension's one
//! error type (SQLSTATE, message, detail, hint from `error/adopt.rs`) and its collision rule is the
//! pure core's `Layout::first_id_at`. Every identifier reaches the DDL quoted by Postgres itself
//! (`quote_ident`), never pasted in as the caller wrote it.
//!
//! Refused, each with its own SQLSTATE (see `error/adopt.rs`): a NULL argument, an OID that names no
//! relation, a relation that is not an ordinary or partitioned table (view, materialized view,
//! sequence, foreign table …), a missing, generated or non-integer column, a column that draws
//! from no sequence (a plain column is the application's to migrate), and existing values that
//! new IDs could repeat. A column that already defaults to `snowflake_nextval()` gets a NOTICE
//! and is left alone.
//!
//! The steps, inside the caller's transaction, after `LOCK TABLE … IN ACCESS EXCLUSIVE MODE` so
//! that no row can arrive between the check and the switch:
//! 1. refuse unless every existing value is below the smallest ID any server can issue now;
//! 2. `ALTER COLUMN … DROP IDENTITY` for an identity column (Postgres drops the identity's own
//!    sequence with it; a NOTICE gives its last value);
//! 3. `ALTER COLUMN … TYPE bigint` for a smallint or integer column;
//! 4. `ALTER COLUMN … SET DEFAULT snowflake_nextval()`; a sequence the old default used stays
//!    where it is, and a NOTICE names it.

use crate::error::{AdoptError, OrReport, SnowflakeError};
use crate::gucs;
use pgrx::prelude::*;
use pgrx::spi::{SpiClient, SpiResult};
use snowflake_core::clock::wall_now;

#[pg_extern(
    volatile,
    sql = r#"
CREATE FUNCTION snowflake_adopt(tbl regclass, col text DEFAULT 'id') RETURNS void
VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_adopt_wrapper';
"#
)]
fn snowflake_adopt(tbl: Option<pg_sys::Oid>, col: Option<&str>) {
    // Not STRICT: a NULL argument is a mistake to report, not a call to skip in silence.
    let (Some(tbl), Some(col)) = (tbl, col) else {
        refuse(AdoptError::NullArgument {
            function: "snowflake_adopt",
            argument: if tbl.is_none() { "tbl" } else { "col" },
        })
    };
    Spi::connect_mut(|client| adopt(client, tbl, col))
        .map_err(|e| SnowflakeError::Internal {
            context: "snowflake_adopt",
            cause: e.to_string(),
        })
        .or_report()
}

/// The steps, in order; each refusal raises its ERROR and ends the call.
fn adopt(client: &mut SpiClient<'_>, tbl: pg_sys::Oid, col: &str) -> SpiResult<()> {
    let qualified_table = lock_table(client, tbl)?;
    let column = Column::inspect(client, tbl, col, qualified_table)?;
    column.refuse_unless_integer(col);
    if column.already_adopted() {
        AdoptError::AlreadyAdopted {
            table: column.table,
            column: column.quoted,
        }
        .notice();
        return Ok(());
    }
    column.refuse_without_sequence(col);
    refuse_on_collision(client, &column, col)?;
    alter(client, &column)?;
    notice_about_sequences(&column);
    warn_about_narrow_references(client, tbl, col, &column)
}

/// Raises `error` as an ERROR.
pub(super) fn refuse(error: AdoptError) -> ! {
    SnowflakeError::from(error).report()
}

impl AdoptError {
    fn notice(self) {
        SnowflakeError::from(self).report_notice();
    }
}

/// Checks that `tbl` names an ordinary or partitioned table and locks it (ACCESS EXCLUSIVE, so
/// that no row arrives between the check and the switch); returns its schema-qualified,
/// quoted name.
fn lock_table(client: &mut SpiClient<'_>, tbl: pg_sys::Oid) -> SpiResult<String> {
    let (qualified, _) = checked_table(client, tbl)?;
    client.update(
        &format!("LOCK TABLE {qualified} IN ACCESS EXCLUSIVE MODE"),
        None,
        &[],
    )?;
    Ok(qualified)
}

/// Refuses unless `tbl` names an ordinary or partitioned table; returns its schema-qualified,
/// quoted name and its `relkind` (`r` or `p`).
pub(super) fn checked_table(
    client: &mut SpiClient<'_>,
    tbl: pg_sys::Oid,
) -> SpiResult<(String, String)> {
    // A regclass argument is only an OID: the relation may never have existed
    // (999999::regclass) or may have been dropped since the OID was taken.
    let relation = client.update(
        "SELECT format('%I.%I', n.nspname, c.relname) AS qualified, c.relname::text AS name,
                c.relkind::text AS kind
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
        Some(1),
        &[tbl.into()],
    )?;
    if relation.is_empty() {
        refuse(AdoptError::NoSuchRelation { oid: tbl.to_u32() })
    }
    let relation = relation.first();
    let qualified: String = relation.get_by_name("qualified")?.unwrap_or_default();
    let relkind: String = relation.get_by_name("kind")?.unwrap_or_default();
    // Ordinary and partitioned tables: a view's rows live in its tables, a foreign table's on
    // another server, a sequence or matview has no column default to switch.
    if relkind != "r" && relkind != "p" {
        refuse(AdoptError::NotATable {
            relation: relation.get_by_name("name")?.unwrap_or_default(),
            kind: relation_kind(&relkind),
        })
    }
    Ok((qualified, relkind))
}

/// The name Postgres' messages use for a relation kind (`pg_class.relkind`).
pub(super) fn relation_kind(relkind: &str) -> &'static str {
    match relkind {
        "v" => "view",
        "m" => "materialized view",
        "S" => "sequence",
        "f" => "foreign table",
        "i" | "I" => "index",
        "c" => "composite type",
        "t" => "TOAST table",
        _ => "relation",
    }
}

/// What the catalogs say about the column to adopt.
pub(super) struct Column {
    /// Schema-qualified, quoted: ready for DDL.
    pub(super) qualified_table: String,
    /// As the user named it, for messages.
    pub(super) table: String,
    /// Quoted, ready for DDL.
    pub(super) quoted: String,
    pub(super) type_name: String,
    integer: bool,
    generated: bool,
    pub(super) identity: bool,
    /// The default expression, if any.
    default: Option<String>,
    /// Sequences the column's default reads (serial, bigserial, `nextval('…')`), as regclass text.
    default_sequences: Option<String>,
    /// The identity's own sequence and its last value, if it has one.
    identity_sequence: Option<(String, Option<i64>)>,
}

/// The catalog query behind [`Column::inspect`]: one row, whose column fields are NULL when the
/// table has no such column.
const COLUMN_QUERY: &str = "
    SELECT c.relname::text AS table_name,
           quote_ident(a.attname) AS quoted,
           format_type(a.atttypid, NULL) AS type_name,
           a.atttypid = ANY ('{int2,int4,int8}'::regtype[]) AS integer,
           a.attgenerated <> '' AS generated,
           a.attidentity <> '' AS identity,
           (SELECT pg_get_expr(ad.adbin, ad.adrelid) FROM pg_attrdef ad
            WHERE ad.adrelid = a.attrelid AND ad.adnum = a.attnum) AS default_expr,
           (SELECT string_agg(d.refobjid::regclass::text, ', ' ORDER BY d.refobjid)
            FROM pg_attrdef ad
            JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass
                 AND d.objid = ad.oid AND d.refclassid = 'pg_class'::regclass
            JOIN pg_class s ON s.oid = d.refobjid AND s.relkind = 'S'
            WHERE ad.adrelid = a.attrelid AND ad.adnum = a.attnum) AS default_sequences,
           (SELECT d.objid::regclass::text FROM pg_depend d
            WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
              AND d.refobjid = a.attrelid AND d.refobjsubid = a.attnum
              AND d.deptype = 'i') AS identity_sequence,
           (SELECT pg_sequence_last_value(d.objid::regclass) FROM pg_depend d
            WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
              AND d.refobjid = a.attrelid AND d.refobjsubid = a.attnum
              AND d.deptype = 'i') AS identity_last_value
    FROM pg_class c LEFT JOIN pg_attribute a ON a.attrelid = c.oid
         AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped
    WHERE c.oid = $1";

impl Column {
    /// Reads the column `col` of the locked table `tbl` from the catalogs; refuses a column the
    /// table does not have.
    pub(super) fn inspect(
        client: &mut SpiClient<'_>,
        tbl: pg_sys::Oid,
        col: &str,
        qualified_table: String,
    ) -> SpiResult<Column> {
        let row = client
            .update(COLUMN_QUERY, Some(1), &[tbl.into(), col.into()])?
            .first();
        let table: String = row.get_by_name("table_name")?.unwrap_or_default();
        let Some(quoted) = row.get_by_name::<String, _>("quoted")? else {
            refuse(AdoptError::NoSuchColumn {
                table,
                column: col.into(),
            })
        };
        let identity_sequence = match row.get_by_name::<String, _>("identity_sequence")? {
            Some(sequence) => Some((sequence, row.get_by_name("identity_last_value")?)),
            None => None,
        };
        Ok(Column {
            qualified_table,
            table,
            quoted,
            type_name: row.get_by_name("type_name")?.unwrap_or_default(),
            integer: row.get_by_name("integer")?.unwrap_or_default(),
            generated: row.get_by_name("generated")?.unwrap_or_default(),
            identity: row.get_by_name("identity")?.unwrap_or_default(),
            default: row.get_by_name("default_expr")?,
            default_sequences: row.get_by_name("default_sequences")?,
            identity_sequence,
        })
    }

    pub(super) fn already_adopted(&self) -> bool {
        self.default
            .as_deref()
            .is_some_and(|d| d.contains("snowflake_nextval()"))
    }

    /// Refuses a generated column and a non-integer one (`col`: the name as the user gave it).
    pub(super) fn refuse_unless_integer(&self, col: &str) {
        let (table, column) = (self.table.clone(), col.to_string());
        if self.generated {
            refuse(AdoptError::GeneratedColumn { table, column })
        }
        if !self.integer {
            refuse(AdoptError::NotInteger {
                table,
                column,
                type_name: self.type_name.clone(),
            })
        }
    }

    /// Refuses a column that draws from no sequence: only such a column has values a server
    /// numbered on its own; anything else is the application's to migrate.
    pub(super) fn refuse_without_sequence(&self, col: &str) {
        if !self.identity && self.default_sequences.is_none() {
            refuse(AdoptError::NoSequence {
                table: self.table.clone(),
                column: col.into(),
                default: self.default.clone(),
            })
        }
    }
}

/// Refuses unless every existing value is below the smallest ID any server can issue now.
pub(super) fn refuse_on_collision(
    client: &mut SpiClient<'_>,
    column: &Column,
    col: &str,
) -> SpiResult<()> {
    let max: Option<i64> = client
        .update(
            &format!(
                "SELECT max({})::bigint FROM {}",
                column.quoted, column.qualified_table
            ),
            Some(1),
            &[],
        )?
        .first()
        .get_one()?;
    let first_id_now = gucs::layout().first_id_at(wall_now()).or_report();
    if let Some(max) = max.filter(|&max| max >= first_id_now) {
        refuse(AdoptError::WouldCollide {
            table: column.table.clone(),
            column: col.into(),
            max,
        })
    }
    Ok(())
}

/// The switch: identity dropped, type widened to bigint, default set to the extension's
/// `snowflake_nextval()` (schema-qualified).
pub(super) fn alter(client: &mut SpiClient<'_>, column: &Column) -> SpiResult<()> {
    let extension_schema = extension_schema(client)?;
    let alter = format!(
        "ALTER TABLE {} ALTER COLUMN {}",
        column.qualified_table, column.quoted
    );
    if column.identity {
        client.update(&format!("{alter} DROP IDENTITY"), None, &[])?;
    }
    if column.type_name != "bigint" {
        client.update(&format!("{alter} TYPE bigint"), None, &[])?;
    }
    client.update(
        &format!("{alter} SET DEFAULT {extension_schema}.snowflake_nextval()"),
        None,
        &[],
    )?;
    Ok(())
}

/// The schema pg_snowflake is installed in, quoted for DDL.
pub(super) fn extension_schema(client: &mut SpiClient<'_>) -> SpiResult<String> {
    Ok(client
        .update(
            "SELECT quote_ident(n.nspname) FROM pg_extension e
             JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_snowflake'",
            Some(1),
            &[],
        )?
        .first()
        .get_one()?
        .unwrap_or_default())
}

/// Says what became of the sequence the column used to draw from.
fn notice_about_sequences(column: &Column) {
    if let Some((sequence, last_value)) = &column.identity_sequence {
        AdoptError::IdentitySequenceDropped {
            sequence: sequence.clone(),
            column: column.quoted.clone(),
            last_value: *last_value,
        }
        .notice();
    }
    if let Some(sequences) = &column.default_sequences {
        AdoptError::SequenceKept {
            sequences: sequences.clone(),
            column: column.quoted.clone(),
        }
        .notice();
    }
}

/// Warns about foreign-key columns referencing the adopted column that are narrower than
/// bigint: they cannot hold the new IDs.
pub(super) fn warn_about_narrow_references(
    client: &mut SpiClient<'_>,
    tbl: pg_sys::Oid,
    col: &str,
    column: &Column,
) -> SpiResult<()> {
    let narrow_references: Option<String> = client
        .update(
            "SELECT string_agg(format('%s.%I (%s)', con.conrelid::regclass, a.attname,
                                      format_type(a.atttypid, NULL)), ', '
                               ORDER BY con.conrelid::regclass::text COLLATE \"C\", a.attname)
             FROM pg_constraint con
             CROSS JOIN LATERAL unnest(con.conkey, con.confkey) AS k(attnum, refnum)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
             WHERE con.contype = 'f' AND con.confrelid = $1
               AND k.refnum = (SELECT attnum FROM pg_attribute
                               WHERE attrelid = $1 AND attname = $2)
               AND a.atttypid <> 'bigint'::regtype",
            Some(1),
            &[tbl.into(), col.into()],
        )?
        .first()
        .get_one()?;
    if let Some(columns) = narrow_references {
        SnowflakeError::from(AdoptError::NarrowReferences {
            column: column.quoted.clone(),
            columns,
        })
        .report_warning();
    }
    Ok(())
}

extension_sql_file!(
    "../../sql/install/adopt_comment.sql",
    name = "adopt_comment",
    requires = [snowflake_adopt],
);

extension_sql_file!(
    "../../sql/install/sequence_keys.sql",
    name = "sequence_keys",
    requires = [snowflake_adopt],
);
