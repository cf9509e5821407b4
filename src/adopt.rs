//! `snowflake_adopt`: switches an existing serial / bigserial / identity / sequence-default key
//! column to `DEFAULT snowflake_nextval()`, with ordinary DDL only.
//!
//! Written in Rust over SPI rather than PL/pgSQL so that its refusals are the extension's one
//! error type (SQLSTATE, message, detail, hint from `error.rs`) and its collision rule is the
//! pure core's `Layout::first_id_at`. Every identifier reaches the DDL quoted by Postgres itself
//! (`quote_ident`), never pasted in as the caller wrote it.
//!
//! Refused, each with its own SQLSTATE (see `error.rs`): a NULL argument, an OID that names no
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

use crate::error::{OrReport, SnowflakeError};
use crate::gucs;
use pgrx::prelude::*;
use pgrx::spi::SpiResult;
use snowflake_core::clock::wall_now;

/// What the catalogs say about the column to adopt.
struct Column {
    /// Schema-qualified, quoted: ready for DDL.
    qualified_table: String,
    /// As the user named it, for messages.
    table: String,
    /// Quoted, ready for DDL.
    quoted: String,
    type_name: String,
    identity: bool,
    /// Sequences the column's default reads (serial, bigserial, `nextval('…')`), as regclass text.
    default_sequences: Option<String>,
    /// The identity's own sequence and its last value, if it has one.
    identity_sequence: Option<(String, Option<i64>)>,
}

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
        SnowflakeError::AdoptNullArgument {
            argument: if tbl.is_none() { "tbl" } else { "col" },
        }
        .report()
    };
    adopt(tbl, col)
        .map_err(|e| SnowflakeError::Internal {
            context: "snowflake_adopt",
            cause: e.to_string(),
        })
        .or_report()
}

/// The name Postgres' messages use for a relation kind (`pg_class.relkind`).
fn relation_kind(relkind: &str) -> &'static str {
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

fn adopt(tbl: pg_sys::Oid, col: &str) -> SpiResult<()> {
    Spi::connect_mut(|client| {
        // A regclass argument is only an OID: the relation may never have existed
        // (999999::regclass) or may have been dropped since the OID was taken.
        let relation = client.update(
            "SELECT format('%I.%I', n.nspname, c.relname), c.relname::text, c.relkind::text
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
            Some(1),
            &[tbl.into()],
        )?;
        if relation.is_empty() {
            SnowflakeError::AdoptNoSuchRelation { oid: tbl.to_u32() }.report()
        }
        let relation = relation.first();
        let qualified_table: String = relation.get(1)?.unwrap_or_default();
        let relkind: String = relation.get(3)?.unwrap_or_default();
        // Ordinary and partitioned tables: a view's rows live in its tables, a foreign table's
        // on another server, a sequence or matview has no column default to switch.
        if relkind != "r" && relkind != "p" {
            SnowflakeError::AdoptNotATable {
                relation: relation.get(2)?.unwrap_or_default(),
                kind: relation_kind(&relkind),
            }
            .report()
        }
        client.update(
            &format!("LOCK TABLE {qualified_table} IN ACCESS EXCLUSIVE MODE"),
            None,
            &[],
        )?;

        let found = client
            .update(
                "SELECT c.relname::text, quote_ident(a.attname), format_type(a.atttypid, NULL),
                        a.attidentity <> '', a.atttypid = ANY ('{int2,int4,int8}'::regtype[]),
                        (SELECT string_agg(d.refobjid::regclass::text, ', ' ORDER BY d.refobjid)
                         FROM pg_attrdef ad
                         JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass
                              AND d.objid = ad.oid AND d.refclassid = 'pg_class'::regclass
                         JOIN pg_class s ON s.oid = d.refobjid AND s.relkind = 'S'
                         WHERE ad.adrelid = a.attrelid AND ad.adnum = a.attnum),
                        (SELECT d.objid::regclass::text FROM pg_depend d
                         WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
                           AND d.refobjid = a.attrelid AND d.refobjsubid = a.attnum
                           AND d.deptype = 'i'),
                        (SELECT pg_sequence_last_value(d.objid::regclass) FROM pg_depend d
                         WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
                           AND d.refobjid = a.attrelid AND d.refobjsubid = a.attnum
                           AND d.deptype = 'i'),
                        a.attgenerated <> '',
                        (SELECT pg_get_expr(ad.adbin, ad.adrelid) FROM pg_attrdef ad
                         WHERE ad.adrelid = a.attrelid AND ad.adnum = a.attnum)
                 FROM pg_class c LEFT JOIN pg_attribute a ON a.attrelid = c.oid
                      AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped
                 WHERE c.oid = $1",
                Some(1),
                &[tbl.into(), col.into()],
            )?
            .first();
        let table: String = found.get(1)?.unwrap_or_default();
        let Some(quoted) = found.get::<String>(2)? else {
            SnowflakeError::AdoptNoSuchColumn {
                table,
                column: col.into(),
            }
            .report()
        };
        let column = Column {
            qualified_table,
            table,
            quoted,
            type_name: found.get(3)?.unwrap_or_default(),
            identity: found.get(4)?.unwrap_or_default(),
            default_sequences: found.get(6)?,
            identity_sequence: found
                .get::<String>(7)?
                .map(|s| (s, found.get(8).ok().flatten())),
        };
        if found.get::<bool>(9)? == Some(true) {
            SnowflakeError::AdoptGeneratedColumn {
                table: column.table,
                column: col.into(),
            }
            .report()
        }
        if found.get::<bool>(5)? != Some(true) {
            SnowflakeError::AdoptNotInteger {
                table: column.table,
                column: col.into(),
                type_name: column.type_name,
            }
            .report()
        }
        let default: Option<String> = found.get(10)?;
        if default
            .as_deref()
            .is_some_and(|d| d.contains("snowflake_nextval()"))
        {
            SnowflakeError::AdoptAlreadyAdopted {
                table: column.table,
                column: column.quoted,
            }
            .report_notice();
            return Ok(());
        }
        // Only a column that draws its values from a sequence has values a server numbered on
        // its own; anything else is the application's to migrate.
        if !column.identity && column.default_sequences.is_none() {
            SnowflakeError::AdoptNoSequence {
                table: column.table,
                column: col.into(),
                default,
            }
            .report()
        }

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
            SnowflakeError::AdoptWouldCollide {
                table: column.table,
                column: col.into(),
                max,
            }
            .report()
        }

        let extension_schema: String = client
            .update(
                "SELECT quote_ident(n.nspname) FROM pg_extension e
                 JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_snowflake'",
                Some(1),
                &[],
            )?
            .first()
            .get_one()?
            .unwrap_or_default();
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

        notice_about_sequences(&column);

        let narrow_references: Option<String> = client
            .update(
                "SELECT string_agg(format('%s.%I (%s)', con.conrelid::regclass, a.attname,
                                          format_type(a.atttypid, NULL)), ', ' ORDER BY 1)
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
            SnowflakeError::AdoptNarrowReferences {
                column: column.quoted.clone(),
                columns,
            }
            .report_warning();
        }
        Ok(())
    })
}

/// Says what became of the sequence the column used to draw from.
fn notice_about_sequences(column: &Column) {
    if let Some((sequence, last_value)) = &column.identity_sequence {
        SnowflakeError::AdoptIdentitySequenceDropped {
            sequence: sequence.clone(),
            column: column.quoted.clone(),
            last_value: *last_value,
        }
        .report_notice();
    }
    if let Some(sequences) = &column.default_sequences {
        SnowflakeError::AdoptSequenceKept {
            sequences: sequences.clone(),
            column: column.quoted.clone(),
        }
        .report_notice();
    }
}

extension_sql!(
    r#"
COMMENT ON FUNCTION snowflake_adopt(regclass, text) IS
'Switches a serial, identity or sequence-default key column to bigint DEFAULT snowflake_nextval() with ordinary DDL; refuses when existing values could collide with new IDs.';
"#,
    name = "adopt_comment",
    requires = [snowflake_adopt],
);
