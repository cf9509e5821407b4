//! `snowflake_adopt_online`: adopts a large `integer` primary key, and widens the foreign keys
//! that point at it, without holding ACCESS EXCLUSIVE for the length of a rewrite.
//!
//! The procedure itself is PL/pgSQL (`sql/install/adopt_online.sql`): it needs transaction
//! control (a COMMIT between batches, so that a crash, a cancel or a lost connection loses at
//! most one batch and the next CALL resumes from the progress table), which a procedure written
//! in PL/pgSQL has and a C function called through SPI does not. What it refuses is decided
//! here, in Rust, so that its errors are the extension's one error type (`error/adopt.rs`) and
//! its collision rule is `snowflake_adopt`'s (`adopt::refuse_on_collision`).
//!
//! `snowflake_adopt_online_check(tbl, col)` is called once, at the procedure's first CALL for a
//! table, before anything is changed. It takes no lock beyond the catalog reads: nothing is
//! changed until the procedure's first step, and the swap checks collisions again under its
//! lock.

use super::adopt::{checked_table, refuse, refuse_on_collision, Column};
use crate::error::{AdoptError, OrReport, SnowflakeError};
use pgrx::prelude::*;
use pgrx::spi::{SpiClient, SpiResult};

#[pg_extern(
    volatile,
    sql = r#"
CREATE FUNCTION snowflake_adopt_online_check(tbl regclass, col text) RETURNS boolean
VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_adopt_online_check_wrapper';
"#
)]
fn snowflake_adopt_online_check(tbl: Option<pg_sys::Oid>, col: Option<&str>) -> bool {
    // Not STRICT: a NULL argument is a mistake to report, not a call to skip in silence.
    let (Some(tbl), Some(col)) = (tbl, col) else {
        refuse(AdoptError::NullArgument {
            function: "snowflake_adopt_online_check",
            argument: if tbl.is_none() { "tbl" } else { "col" },
        })
    };
    Spi::connect_mut(|client| check(client, tbl, col))
        .map_err(|e| SnowflakeError::Internal {
            context: "snowflake_adopt_online",
            cause: e.to_string(),
        })
        .or_report()
}

/// Refuses what the online path cannot adopt; false (after a NOTICE) when the column is
/// adopted already, true when the procedure may start.
fn check(client: &mut SpiClient<'_>, tbl: pg_sys::Oid, col: &str) -> SpiResult<bool> {
    let (qualified_table, relkind) = checked_table(client, tbl)?;
    let column = Column::inspect(client, tbl, col, qualified_table)?;
    // A partitioned table's primary key cannot be swapped in with ADD CONSTRAINT … USING INDEX
    // (an index on a partitioned table cannot be built CONCURRENTLY).
    if relkind == "p" {
        refuse(AdoptError::OnlinePartitioned {
            table: column.table.clone(),
        })
    }
    column.refuse_unless_integer(col);
    if column.already_adopted() {
        SnowflakeError::from(AdoptError::AlreadyAdopted {
            table: column.table.clone(),
            column: column.quoted.clone(),
        })
        .report_notice();
        return Ok(false);
    }
    if column.type_name == "bigint" {
        refuse(AdoptError::OnlineAlreadyBigint {
            table: column.table.clone(),
            column: col.into(),
        })
    }
    column.refuse_without_sequence(col);
    refuse_unless_primary_key(client, tbl, col, &column)?;
    refuse_composite_references(client, tbl, col)?;
    refuse_on_collision(client, &column, col)?;
    Ok(true)
}

/// Refuses a table without a primary key, and a column that is not its one-column primary key:
/// the swap moves the primary key onto the new column; other keys are `snowflake_adopt`'s.
fn refuse_unless_primary_key(
    client: &mut SpiClient<'_>,
    tbl: pg_sys::Oid,
    col: &str,
    column: &Column,
) -> SpiResult<()> {
    let key = client.update(
        "SELECT pg_get_constraintdef(con.oid) AS def,
                con.conkey = ARRAY[(SELECT attnum FROM pg_attribute
                                    WHERE attrelid = $1 AND attname = $2)] AS is_column
         FROM pg_constraint con WHERE con.conrelid = $1 AND con.contype = 'p'",
        Some(1),
        &[tbl.into(), col.into()],
    )?;
    if key.is_empty() {
        refuse(AdoptError::OnlineNoPrimaryKey {
            table: column.table.clone(),
        })
    }
    let key = key.first();
    if !key.get_by_name::<bool, _>("is_column")?.unwrap_or(false) {
        refuse(AdoptError::OnlineNotPrimaryKey {
            table: column.table.clone(),
            column: col.into(),
            key: key.get_by_name("def")?.unwrap_or_default(),
        })
    }
    Ok(())
}

/// Refuses a foreign key of several columns that references the key: its referencing columns
/// cannot be swapped one at a time.
fn refuse_composite_references(
    client: &mut SpiClient<'_>,
    tbl: pg_sys::Oid,
    col: &str,
) -> SpiResult<()> {
    let composite = client.update(
        "SELECT con.conname::text AS constraint_name, con.conrelid::regclass::text AS table_name
         FROM pg_constraint con
         WHERE con.contype = 'f' AND con.confrelid = $1 AND cardinality(con.confkey) > 1
           AND (SELECT attnum FROM pg_attribute WHERE attrelid = $1 AND attname = $2)
               = ANY (con.confkey)
         ORDER BY 2, 1",
        Some(1),
        &[tbl.into(), col.into()],
    )?;
    if !composite.is_empty() {
        let row = composite.first();
        refuse(AdoptError::OnlineCompositeReference {
            constraint: row.get_by_name("constraint_name")?.unwrap_or_default(),
            table: row.get_by_name("table_name")?.unwrap_or_default(),
        })
    }
    Ok(())
}

extension_sql_file!(
    "../../sql/install/adopt_online.sql",
    name = "adopt_online",
    requires = [snowflake_adopt_online_check, "adopt_comment"],
);
