//! The wording of `snowflake_adopt`'s refusals and notices (`sql/adopt.rs`), of the event
//! trigger that adopts new key columns and its exclusions (`sql/adopt_new_keys.rs`), and of
//! `snowflake_adopt_online`'s checks (`sql/adopt_online.rs`).

use super::catalogue::catalogue;
use super::report::quoted;

catalogue! {
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum AdoptError {
        NullArgument { function: &'static str, argument: &'static str } => {
            ERROR ERRCODE_NULL_VALUE_NOT_ALLOWED
            message "argument \"{argument}\" of {function} must not be null"
            hint { match *function {
                "snowflake_adopt" => "Name the table and its key column, e.g. \
                                      snowflake_adopt('orders', 'id').",
                "snowflake_adopt_online_check" => "Name the table and its integer primary key \
                    column, e.g. CALL snowflake_adopt_online('orders', 'id').",
                _ => "Name the table to leave alone, e.g. \
                      snowflake_adopt_exclude('public.invoices')." } } },
        NoSuchRelation { oid: u32 } => { ERROR ERRCODE_UNDEFINED_TABLE
            message "relation with OID {oid} does not exist"
            hint "Pass an existing table by name, e.g. snowflake_adopt('orders'); an OID taken \
                  before its table was dropped names nothing." },
        NotATable { relation: String, kind: &'static str } => { ERROR ERRCODE_WRONG_OBJECT_TYPE
            message "\"{relation}\" is a {kind}, not a table"
            detail "snowflake_adopt switches the key column of an ordinary or partitioned table."
            hint "Pass the table that holds the rows; for a view, the table it reads from." },
        GeneratedColumn { table: String, column: String } => {
            ERROR ERRCODE_INVALID_COLUMN_DEFINITION
            message ("column {} of table \"{table}\" is a generated column", quoted(column))
            hint "A generated column computes its value from other columns; adopt the table's \
                  key column instead." },
        NoSequence { table: String, column: String, default: Option<String> } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("column {} of table \"{table}\" does not draw its values from a sequence",
                     quoted(column))
            detail { Some(default.as_ref().map_or("It has no default.".into(),
                                                  |d| format!("Its default is {}.", quoted(d)))) }
            hint "snowflake_adopt switches serial, identity and sequence-default columns. To give \
                  this column snowflake IDs anyway, use ALTER TABLE … ALTER COLUMN … SET DEFAULT \
                  snowflake_nextval()." },
        AlreadyAdopted { table: String, column: String } => { NOTICE ERRCODE_SUCCESSFUL_COMPLETION
            message "column {column} of table \"{table}\" already defaults to \
                     snowflake_nextval(), skipping"
            hint "Nothing was changed." },
        NoSuchColumn { table: String, column: String } => { ERROR ERRCODE_UNDEFINED_COLUMN
            message ("column {} of relation \"{table}\" does not exist", quoted(column))
            hint "Name the key column as the second argument, e.g. snowflake_adopt('orders', \
                  'order_id')." },
        NotInteger { table: String, column: String, type_name: String } => {
            ERROR ERRCODE_DATATYPE_MISMATCH
            message "column \"{column}\" of table \"{table}\" is of type {type_name}, not an \
                     integer type"
            hint "snowflake_adopt switches smallint, integer and bigint columns to bigint \
                  snowflake IDs." },
        WouldCollide { table: String, column: String, max: i64 } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "column \"{column}\" of table \"{table}\" holds values that snowflake IDs \
                     could repeat"
            detail "Its largest value, {max}, is not below snowflake_from_timestamp(now()), the \
                    smallest ID a server can issue now."
            hint "Renumber the rows below snowflake_from_timestamp(now()), or keep the sequence \
                  for this table." },
        IdentitySequenceDropped { sequence: String, column: String, last_value: Option<i64> } => {
            NOTICE ERRCODE_SUCCESSFUL_COMPLETION
            message ("identity sequence {sequence} was dropped with the identity of column \
                      {column} (its last value: {})",
                     last_value.map_or_else(|| "none".to_string(), |v| v.to_string()))
            hint "Postgres drops an identity's sequence with the identity; nothing else can have \
                  used it." },
        SequenceKept { sequences: String, column: String } => { NOTICE ERRCODE_SUCCESSFUL_COMPLETION
            message "sequence {sequences} is left in place; column {column} no longer uses it"
            hint "Drop it with DROP SEQUENCE once nothing else uses it." },
        NarrowReferences { column: String, columns: String } => { WARNING ERRCODE_WARNING
            message "foreign keys to column {column} are too narrow for snowflake IDs: {columns}"
            hint "Alter each of them to bigint with ALTER TABLE … ALTER COLUMN … TYPE bigint." },
        /// The event trigger put a new column on the generator (`table`, `sequence`: as SQL
        /// quotes them; `was`: `serial`, `integer GENERATED ALWAYS AS IDENTITY`).
        NewKeyAdopted { table: String, column: String, was: String, sequence: String } => {
            LOG ERRCODE_SUCCESSFUL_COMPLETION
            message ("pg_snowflake.adopt_new_keys put column {} of table {table} on \
                      snowflake_nextval()", quoted(column))
            detail "It was {was}; it is now bigint, and its sequence {sequence} was dropped."
            hint ("To keep a table's sequences, exclude it with snowflake_adopt_exclude('{}'), \
                   or run SET LOCAL pg_snowflake.adopt_new_keys = off in the migration that \
                   makes the column.", table.replace('\'', "''")) },
        NewKeyNotAllowed { table: String, column: String, role: String, missing: String } => {
            ERROR ERRCODE_INSUFFICIENT_PRIVILEGE
            message ("pg_snowflake.adopt_new_keys cannot put column {} of table {table} on \
                      snowflake_nextval()", quoted(column))
            detail "Role {role} lacks {missing}, so it could not insert into the table \
                    afterwards."
            hint "GRANT {missing} TO {role}; or run SET LOCAL pg_snowflake.adopt_new_keys = off \
                  in this migration to keep the sequence." },
        ExcludeNoSuchTable { name: String } => { ERROR ERRCODE_UNDEFINED_TABLE
            message ("relation {} does not exist", quoted(name))
            hint "Exclude a table once it exists, by its schema-qualified name, e.g. \
                  snowflake_adopt_exclude('public.invoices'); for a table a migration is about \
                  to make, run SET LOCAL pg_snowflake.adopt_new_keys = off in that migration." },
        ExcludeNotATable { relation: String, kind: &'static str } => {
            ERROR ERRCODE_WRONG_OBJECT_TYPE
            message "{relation} is a {kind}, not a table"
            detail "Only an ordinary or partitioned table has key columns to leave alone."
            hint "Exclude the table that holds the rows." },
        AlreadyExcluded { table: String } => { NOTICE ERRCODE_SUCCESSFUL_COMPLETION
            message "table {table} is already excluded, skipping"
            hint "Nothing was changed; DELETE its row from snowflake_adopt_exclusions to include \
                  it again." },
        OnlinePartitioned { table: String } => { ERROR ERRCODE_FEATURE_NOT_SUPPORTED
            message "snowflake_adopt_online does not adopt partitioned table \"{table}\""
            detail "A partitioned table's primary key cannot be swapped with \
                    ADD CONSTRAINT … USING INDEX."
            hint "Use snowflake_adopt in a maintenance window (it rewrites every partition under \
                  its lock), or adopt a new partitioned table and move the rows." },
        OnlineNoPrimaryKey { table: String } => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "table \"{table}\" has no primary key"
            hint "snowflake_adopt_online swaps a primary key without a long lock; for a table \
                  without one, use snowflake_adopt." },
        OnlineNotPrimaryKey { table: String, column: String, key: String } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("column {} of table \"{table}\" is not its one-column primary key",
                     quoted(column))
            detail ("The primary key is {}.", quoted(key))
            hint "Name the primary key's column; other columns (and keys of several columns) are \
                  snowflake_adopt's." },
        OnlineAlreadyBigint { table: String, column: String } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("column {} of table \"{table}\" is already bigint: there is nothing to \
                      rewrite", quoted(column))
            hint "Use snowflake_adopt: on a bigint column it only changes the catalog, under a \
                  lock held for milliseconds." },
        OnlineCompositeReference { constraint: String, table: String } => {
            ERROR ERRCODE_FEATURE_NOT_SUPPORTED
            message ("foreign key {} of table \"{table}\" references the key with several \
                      columns", quoted(constraint))
            hint "snowflake_adopt_online widens one-column foreign keys only; drop this one and \
                  make it again after the adoption, or use snowflake_adopt." },
    }
}
