//! The one error type of the extension, and the one place where every user-visible message is
//! worded.
//!
//! Every variant — errors, and the NOTICEs and WARNINGs the extension raises — is described
//! once, in [`SnowflakeError::message`]: its SQLSTATE, message (Postgres style: lower case, no
//! trailing period), detail and hint side by side. The core's errors ([`CoreError`]) are data;
//! they are worded here too. Text a user typed is shown as a bounded prefix (see [`quoted`]),
//! so no input can make a message, or a line of the server log, larger than a few hundred bytes.
//! The golden tests in `tests/pg_regress` assert each text word for word.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use snowflake_core::calendar::{format_instant, format_unix_ms};
use snowflake_core::error::TimeField;
use snowflake_core::Error as CoreError;

use PgSqlErrorCode::*;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnowflakeError {
    /// An error of the pure core (layout, generator, base 32).
    Core(CoreError),
    /// The library was loaded into a backend but not through `shared_preload_libraries`, so there
    /// is no shared generator.
    NotPreloaded,
    /// `pg_snowflake.node_id` is still at its "unset" default.
    NodeUnset { max: u32 },
    /// postgresql.conf gives a setting a value Postgres refused (shown as written).
    InvalidSetting {
        name: &'static str,
        value: String,
        reason: String,
    },
    /// `snowflake_nextval()` on a standby (or during crash recovery).
    InRecovery,
    /// Not an error: no renewer process runs, so a backend writes a reservation itself
    /// (reported to the server log, once per backend).
    RenewerNotRunning,
    /// Not an error: the system clock stepped back (reported as a WARNING, rate-limited).
    ClockSteppedBack { ms: i64 },
    /// Not an error: the system clock leapt ahead of the monotonic clock (WARNING): held.
    ClockJumpHeld { ms: i64, confirm_s: i64 },
    /// Not an error: a held forward step lasted; followed now (WARNING).
    ClockJumpFollowed { ms: i64 },
    /// Not an error: the server starts with another node id than its state file's (LOG).
    NodeSwitched {
        from: Option<u32>,
        to: u32,
        lead_dropped: bool,
    },
    /// Not an error: reservations cannot be written (WARNING from the renewer, at most one
    /// every few seconds, with the count of those not logged).
    ReservationsFailing { cause: String, not_logged: u64 },
    /// pg_upgrade's binary-upgrade start found a reservation this new cluster wrote itself
    /// before pg_upgrade (LOG): moved aside, the upgrade marker written in its place.
    OwnReservationMovedAside {
        path: &'static str,
        aside: &'static str,
    },
    /// The state file exists but does not hold a valid reservation.
    StateFileDamaged { path: &'static str, reason: String },
    /// The state file could not be read or written.
    StateFileIo {
        action: &'static str,
        path: &'static str,
        cause: String,
    },
    /// pg_upgrade made this data directory and the old one's state file was not copied in.
    StateFileNotCarried { path: &'static str },
    /// pg_upgrade loads the library into a new cluster that does not preload it, so nothing
    /// would mark the new data directory as awaiting the old state file.
    NotPreloadedForUpgrade,
    /// A WAL record of our resource manager that this version does not know.
    UnknownWalRecord,
    /// `snowflake_adopt` was given NULL for `argument`.
    AdoptNullArgument { argument: &'static str },
    /// `snowflake_adopt` was given the OID of no relation (never existed, or dropped since).
    AdoptNoSuchRelation { oid: u32 },
    /// `snowflake_adopt` was given a relation that is not an ordinary or partitioned table.
    AdoptNotATable {
        relation: String,
        kind: &'static str,
    },
    /// `snowflake_adopt` was given a generated column.
    AdoptGeneratedColumn { table: String, column: String },
    /// `snowflake_adopt` was given a column that draws from no sequence (no identity, no
    /// serial, no `nextval(…)` default); `default` is its default expression, if any.
    AdoptNoSequence {
        table: String,
        column: String,
        default: Option<String>,
    },
    /// NOTICE: the column already defaults to `snowflake_nextval()`; nothing is done.
    AdoptAlreadyAdopted { table: String, column: String },
    /// `snowflake_adopt` was given a column the table does not have.
    AdoptNoSuchColumn { table: String, column: String },
    /// `snowflake_adopt` was given a column that cannot hold snowflake IDs even as bigint.
    AdoptNotInteger {
        table: String,
        column: String,
        type_name: String,
    },
    /// `snowflake_adopt` found values that IDs made from now on could repeat.
    AdoptWouldCollide {
        table: String,
        column: String,
        max: i64,
    },
    /// NOTICE: adopting an identity column dropped the identity's own sequence.
    AdoptIdentitySequenceDropped {
        sequence: String,
        column: String,
        last_value: Option<i64>,
    },
    /// NOTICE: the sequence(s) the old default drew from are left in place.
    AdoptSequenceKept { sequences: String, column: String },
    /// WARNING: foreign-key columns referencing the adopted column are narrower than bigint.
    AdoptNarrowReferences { column: String, columns: String },
    /// pgrx's SPI layer failed where it cannot (a bug): `context` says which step.
    Internal {
        context: &'static str,
        cause: String,
    },
}

impl From<CoreError> for SnowflakeError {
    fn from(error: CoreError) -> Self {
        SnowflakeError::Core(error)
    }
}

/// A message as Postgres shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub sqlstate: PgSqlErrorCode,
    pub text: String,
    pub detail: Option<String>,
    pub hint: String,
}

fn message(
    sqlstate: PgSqlErrorCode,
    text: impl Into<String>,
    detail: Option<String>,
    hint: impl Into<String>,
) -> Message {
    Message {
        sqlstate,
        text: text.into(),
        detail,
        hint: hint.into(),
    }
}

/// How many characters of a user's text a message shows.
pub const SHOWN_CHARS: usize = 64;

/// User-typed text for a message: in double quotes, whole when short; otherwise its first
/// [`SHOWN_CHARS`] characters, an ellipsis, and its length.
pub fn quoted(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        None => format!("\"{text}\""),
        Some((end, _)) => format!(
            "\"{}...\" ({} characters)",
            &text[..end],
            text.chars().count()
        ),
    }
}

const STATE_FILE_DETAIL: &str = "The file holds this server's last reservation of snowflake IDs; \
                                 without it the server could issue IDs it has issued before.";

impl SnowflakeError {
    /// The SQLSTATE, message, detail and hint of every variant, side by side.
    pub fn message(&self) -> Message {
        use SnowflakeError::*;
        match self {
            Core(core) => core_message(core),
            NotPreloaded => message(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "pg_snowflake must be loaded via shared_preload_libraries",
                None,
                "Add pg_snowflake to shared_preload_libraries in postgresql.conf and restart the \
                 server.",
            ),
            NodeUnset { max } => message(
                ERRCODE_CONFIG_FILE_ERROR,
                "pg_snowflake.node_id is not set",
                Some(
                    "Every server needs its own node id so that IDs made on different servers \
                     never collide."
                        .into(),
                ),
                format!(
                    "Add the line \"pg_snowflake.node_id = N\" to postgresql.conf, with N from 0 \
                     to {max} and different on every server, and restart the server."
                ),
            ),
            InvalidSetting {
                name,
                value,
                reason,
            } => message(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("invalid value for parameter \"{name}\": {}", quoted(value)),
                Some(reason.clone()),
                format!("Correct {name} in postgresql.conf and start the server again."),
            ),
            InRecovery => message(
                ERRCODE_READ_ONLY_SQL_TRANSACTION,
                "cannot make snowflake IDs during recovery",
                None,
                "Make IDs on the primary. A standby follows the primary's reservations through \
                 the WAL and makes IDs once it is promoted.",
            ),
            RenewerNotRunning => message(
                ERRCODE_WARNING,
                "the pg_snowflake renewer is not running: backends write the generator's \
                 reservations themselves",
                Some(
                    "IDs stay unique and durable, but a call that renews the reservation waits \
                     for the disk, and for the synchronous standbys, while it does."
                        .into(),
                ),
                "Check the server log from start-up for why the background worker \
                 \"pg_snowflake renewer\" is not running; it needs a free slot of \
                 max_worker_processes.",
            ),
            ClockSteppedBack { ms } => message(
                ERRCODE_WARNING,
                format!("the system clock stepped back by {ms} ms"),
                Some(
                    "pg_snowflake keeps making IDs from its own clock, which runs ahead of the \
                     system clock until that catches up; IDs stay unique and increasing."
                        .into(),
                ),
                "Check the server's time synchronisation.",
            ),
            ClockJumpHeld { ms, confirm_s } => message(
                ERRCODE_WARNING,
                format!("the system clock leapt {ms} ms ahead of the monotonic clock"),
                Some(format!(
                    "pg_snowflake keeps making IDs from the monotonic clock's account of time, \
                     and follows the system clock only if it keeps the lead for {confirm_s} \
                     seconds; IDs stay unique and increasing."
                )),
                "Check the server's time synchronisation and its hardware clock.",
            ),
            ClockJumpFollowed { ms } => message(
                ERRCODE_WARNING,
                format!("the system clock kept a lead of {ms} ms: pg_snowflake follows it now"),
                Some(
                    "IDs are stamped with the system clock's time again; a lead that was not \
                     real stays in the IDs made since and in the durable reservation."
                        .into(),
                ),
                "If the system clock is wrong, set it right; if IDs then run ahead of it, give \
                 the server a node id it never used (see the README on forward clock steps).",
            ),
            NodeSwitched {
                from,
                to,
                lead_dropped,
            } => message(
                ERRCODE_WARNING,
                match from {
                    Some(from) => format!("pg_snowflake's node id changed from {from} to {to}"),
                    None => format!(
                        "pg_snowflake's node id is {to}; the state file does not say which node \
                         id its reservation was made for"
                    ),
                },
                Some(if *lead_dropped {
                    format!(
                        "Node id {to} never issued IDs on this server, so it owes nothing to the \
                         reservations of the node ids that did: any lead they had over the clock \
                         is dropped. Their highest reservation is kept in the state file."
                    )
                } else {
                    format!(
                        "Node id {to} may have issued IDs on this server before: it resumes above \
                         the highest reservation made here."
                    )
                }),
                "Every server needs a node id no other server uses or used.",
            ),
            ReservationsFailing { cause, not_logged } => message(
                ERRCODE_IO_ERROR,
                format!("could not write pg_snowflake's reservation: {cause}"),
                Some(format!(
                    "Calls that need a new reservation fail until one is written; the renewer \
                     tries again after at most half a second. {not_logged} more failures were \
                     not logged since the last message."
                )),
                "Check that the disk has free space and the server's operating-system user can \
                 write the data directory.",
            ),
            OwnReservationMovedAside { path, aside } => message(
                ERRCODE_WARNING,
                format!(
                    "pg_upgrade: \"{path}\" was written by this new cluster before pg_upgrade, \
                     moved to \"{aside}\""
                ),
                Some(
                    "It holds the new cluster's own reservation, not the old server's: kept, it \
                     would let the upgraded server issue IDs the old one issued."
                        .into(),
                ),
                format!(
                    "After pg_upgrade, copy \"{path}\" from the old data directory into this one \
                     before the first snowflake ID is made."
                ),
            ),
            StateFileDamaged { path, reason } => message(
                ERRCODE_DATA_CORRUPTED,
                format!("pg_snowflake state file \"{path}\" is damaged: {reason}"),
                Some(STATE_FILE_DETAIL.into()),
                "Restore the file from a backup of this data directory. If you are certain the \
                 clock is past every ID this server ever issued, move the file away and start \
                 the server again.",
            ),
            StateFileIo {
                action,
                path,
                cause,
            } => message(
                ERRCODE_IO_ERROR,
                format!("could not {action} pg_snowflake state file \"{path}\": {cause}"),
                Some(STATE_FILE_DETAIL.into()),
                "Check that the server's operating-system user can read and write the file, and \
                 that the disk has free space.",
            ),
            StateFileNotCarried { path } => message(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "this data directory was made by pg_upgrade without its pg_snowflake state file",
                Some(format!(
                    "pg_upgrade does not copy \"{path}\", which holds the old server's last \
                     reservation of snowflake IDs; without it this server could issue IDs the \
                     old one issued."
                )),
                format!(
                    "Stop the server, copy \"{path}\" from the old data directory into this one, \
                     and start the server again. If the old server never made snowflake IDs, \
                     delete this directory's \"{path}\" instead."
                ),
            ),
            NotPreloadedForUpgrade => message(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "pg_snowflake must be in shared_preload_libraries of the new cluster while \
                 pg_upgrade runs",
                Some(
                    "Preloaded, pg_snowflake marks the new data directory as awaiting the old \
                     server's state file; without the mark, the upgraded server would forget \
                     every ID the old one issued."
                        .into(),
                ),
                "Add pg_snowflake to shared_preload_libraries, and copy every pg_snowflake \
                 setting of the old cluster, into the new cluster's postgresql.conf; then run \
                 pg_upgrade again.",
            ),
            UnknownWalRecord => message(
                ERRCODE_INTERNAL_ERROR,
                "unknown pg_snowflake WAL record",
                None,
                "The WAL was written by another version of pg_snowflake; install that version to \
                 replay it.",
            ),
            AdoptNullArgument { argument } => message(
                ERRCODE_NULL_VALUE_NOT_ALLOWED,
                format!("argument \"{argument}\" of snowflake_adopt must not be null"),
                None,
                "Name the table and its key column, e.g. snowflake_adopt('orders', 'id').",
            ),
            AdoptNoSuchRelation { oid } => message(
                ERRCODE_UNDEFINED_TABLE,
                format!("relation with OID {oid} does not exist"),
                None,
                "Pass an existing table by name, e.g. snowflake_adopt('orders'); an OID taken \
                 before its table was dropped names nothing.",
            ),
            AdoptNotATable { relation, kind } => message(
                ERRCODE_WRONG_OBJECT_TYPE,
                format!("\"{relation}\" is a {kind}, not a table"),
                Some(
                    "snowflake_adopt switches the key column of an ordinary or partitioned table."
                        .into(),
                ),
                "Pass the table that holds the rows; for a view, the table it reads from.",
            ),
            AdoptGeneratedColumn { table, column } => message(
                ERRCODE_INVALID_COLUMN_DEFINITION,
                format!(
                    "column {} of table \"{table}\" is a generated column",
                    quoted(column)
                ),
                None,
                "A generated column computes its value from other columns; adopt the table's key \
                 column instead.",
            ),
            AdoptNoSequence {
                table,
                column,
                default,
            } => message(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "column {} of table \"{table}\" does not draw its values from a sequence",
                    quoted(column)
                ),
                Some(match default {
                    Some(default) => format!("Its default is {}.", quoted(default)),
                    None => "It has no default.".into(),
                }),
                "snowflake_adopt switches serial, identity and sequence-default columns. To give \
                 this column snowflake IDs anyway, use ALTER TABLE … ALTER COLUMN … SET DEFAULT \
                 snowflake_nextval().",
            ),
            AdoptAlreadyAdopted { table, column } => message(
                ERRCODE_SUCCESSFUL_COMPLETION,
                format!(
                    "column {column} of table \"{table}\" already defaults to snowflake_nextval(), \
                     skipping"
                ),
                None,
                "Nothing was changed.",
            ),
            AdoptNoSuchColumn { table, column } => message(
                ERRCODE_UNDEFINED_COLUMN,
                format!(
                    "column {} of relation \"{table}\" does not exist",
                    quoted(column)
                ),
                None,
                "Name the key column as the second argument, e.g. snowflake_adopt('orders', \
                 'order_id').",
            ),
            AdoptNotInteger {
                table,
                column,
                type_name,
            } => message(
                ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "column \"{column}\" of table \"{table}\" is of type {type_name}, not an \
                     integer type"
                ),
                None,
                "snowflake_adopt switches smallint, integer and bigint columns to bigint \
                 snowflake IDs.",
            ),
            AdoptWouldCollide { table, column, max } => message(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "column \"{column}\" of table \"{table}\" holds values that snowflake IDs \
                     could repeat"
                ),
                Some(format!(
                    "Its largest value, {max}, is not below snowflake_from_timestamp(now()), the \
                     smallest ID a server can issue now."
                )),
                "Renumber the rows below snowflake_from_timestamp(now()), or keep the sequence \
                 for this table.",
            ),
            AdoptIdentitySequenceDropped {
                sequence,
                column,
                last_value,
            } => message(
                ERRCODE_SUCCESSFUL_COMPLETION,
                format!(
                    "identity sequence {sequence} was dropped with the identity of column \
                     {column} (its last value: {})",
                    last_value.map_or_else(|| "none".to_string(), |v| v.to_string())
                ),
                None,
                "Postgres drops an identity's sequence with the identity; nothing else can have \
                 used it.",
            ),
            AdoptSequenceKept { sequences, column } => message(
                ERRCODE_SUCCESSFUL_COMPLETION,
                format!("sequence {sequences} is left in place; column {column} no longer uses it"),
                None,
                "Drop it with DROP SEQUENCE once nothing else uses it.",
            ),
            AdoptNarrowReferences { column, columns } => message(
                ERRCODE_WARNING,
                format!(
                    "foreign keys to column {column} are too narrow for snowflake IDs: {columns}"
                ),
                None,
                "Alter each of them to bigint with ALTER TABLE … ALTER COLUMN … TYPE bigint.",
            ),
            Internal { context, cause } => message(
                ERRCODE_INTERNAL_ERROR,
                format!("{context}: {cause}"),
                None,
                "This is a bug in pg_snowflake; please report it with the statement that \
                 caused it.",
            ),
        }
    }

    /// Raises this error as a Postgres ERROR: the statement fails. Never returns.
    pub fn report(self) -> ! {
        self.raise_at(PgLogLevel::ERROR);
        unreachable!("an ERROR report does not return")
    }

    /// Reports this as a WARNING (to the server log and the client) and carries on.
    pub fn report_warning(self) {
        self.raise_at(PgLogLevel::WARNING);
    }

    /// Reports this to the server log only (LOG) and carries on.
    pub fn report_log(self) {
        self.raise_at(PgLogLevel::LOG);
    }

    /// Reports this as a NOTICE (to the client) and carries on.
    pub fn report_notice(self) {
        self.raise_at(PgLogLevel::NOTICE);
    }

    /// Raises this error as FATAL: the process exits (at start-up, the server does not start).
    pub fn report_fatal(self) -> ! {
        self.raise_at(PgLogLevel::FATAL);
        unreachable!("a FATAL report does not return")
    }

    fn raise_at(self, level: PgLogLevel) {
        let Message {
            sqlstate,
            text,
            detail,
            hint,
        } = self.message();
        let mut report = ErrorReport::new(sqlstate, text, "pg_snowflake").set_hint(hint);
        if let Some(detail) = detail {
            report = report.set_detail(detail);
        }
        report.report(level);
    }
}

/// The core's errors, worded.
fn core_message(error: &CoreError) -> Message {
    use CoreError::*;
    match error {
        InvalidLayout { reason } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            "invalid snowflake layout",
            Some(format!("The layout is invalid: {reason}.")),
            "Choose pg_snowflake.epoch, time_unit_ms, node_bits and sequence_bits so that the \
             time field covers the present; see \"Layouts\" in pg_snowflake's README.",
        ),
        LayoutChanged {
            recorded,
            configured,
        } => message(
            ERRCODE_CONFIG_FILE_ERROR,
            "the snowflake layout differs from the one this server's IDs were made with",
            Some(format!(
                "The state file records the layout \"{recorded}\"; the settings give \"{configured}\"."
            )),
            "Restore the previous pg_snowflake layout settings. To start a new ID space on \
             purpose, move pg_snowflake.state out of the data directory: IDs made before may \
             then collide with new ones or sort differently.",
        ),
        IdBeyondTimeField { id, field } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("snowflake id {id} lies past the end of the time field"),
            Some(format!(
                "IDs of the layout \"{}\" end at {}.",
                field.layout,
                format_unix_ms(field.end_unix_ms)
            )),
            "Pass an ID made with this layout.",
        ),
        NodeOutOfRange { node, max } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("node id {node} is out of range 0..{max}"),
            None,
            format!("Node ids run from 0 to {max}."),
        ),
        SequenceOutOfRange { seq, max } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("sequence number {seq} is out of range 0..{max}"),
            None,
            format!("Sequence numbers run from 0 to {max}."),
        ),
        InvalidBase32 { text, reason } => message(
            ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid snowflake base-32 text {}: {reason}", quoted(text)),
            None,
            "Pass the 13-character text snowflake_to_base32() makes (digits 0-9 and letters \
             except I, L, O and U).",
        ),
        BatchSizeOutOfRange { n, max } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("batch size {n} is out of range 1..{max}"),
            None,
            format!("Ask for 1 to {max} IDs at a time; call again for more."),
        ),
        NegativeId(id) => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("snowflake id {id} is negative"),
            Some("Snowflake IDs are positive: their sign bit is always 0.".into()),
            "Pass an ID made by snowflake_nextval().",
        ),
        TimeExhausted { end_unix_ms } => message(
            ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
            "snowflake time field is exhausted",
            Some(format!(
                "The time field of this layout ends at {}.",
                format_unix_ms(*end_unix_ms)
            )),
            "No more IDs can be made with this layout and epoch; check the server's clock.",
        ),
        ClockBeforeEpoch { now_unix_ms } => message(
            ERRCODE_DATETIME_FIELD_OVERFLOW,
            "the server's clock is before the snowflake epoch",
            Some(format!("The clock reads {}.", format_unix_ms(*now_unix_ms))),
            "Set the server's clock to the correct time.",
        ),
        TimestampBeforeEpoch { unix_ms, field } => message(
            ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!(
                "timestamp {} is before the snowflake epoch",
                format_instant(*unix_ms)
            ),
            Some(format!(
                "Snowflake IDs count milliseconds from {}.",
                format_unix_ms(field.epoch_unix_ms)
            )),
            time_range_hint(field),
        ),
        TimestampAfterEnd { unix_ms, field } => message(
            ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!(
                "timestamp {} is after the end of the snowflake time field",
                format_instant(*unix_ms)
            ),
            Some(format!(
                "The time field of this layout ends at {}.",
                format_unix_ms(field.end_unix_ms)
            )),
            time_range_hint(field),
        ),
    }
}

fn time_range_hint(field: &TimeField) -> String {
    format!(
        "Pass a timestamp from {} to {}.",
        format_unix_ms(field.epoch_unix_ms),
        format_unix_ms(field.end_unix_ms)
    )
}

/// Turns a `Result` into its value or a Postgres ERROR, for the one-line SQL functions.
pub trait OrReport<T> {
    fn or_report(self) -> T;
}

impl<T, E: Into<SnowflakeError>> OrReport<T> for Result<T, E> {
    fn or_report(self) -> T {
        self.unwrap_or_else(|e| e.into().report())
    }
}

#[cfg(test)]
mod tests;
