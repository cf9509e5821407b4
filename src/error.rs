//! The one error type of the extension, and its one conversion into a Postgres error.
//!
//! Every variant a user can reach has a SQLSTATE, a message in Postgres style (lower case, no
//! trailing period), and a hint saying what to do. The golden tests in `tests/pg_regress` assert
//! each text word for word.

use crate::layout::{format_unix_ms, Layout};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnowflakeError {
    /// The library was loaded into a backend but not through `shared_preload_libraries`, so there
    /// is no shared generator.
    NotPreloaded,
    /// `pg_snowflake.node_id` is still at its "unset" default.
    NodeUnset { max: u32 },
    /// postgresql.conf gives `pg_snowflake.node_id` a value Postgres refused (shown as written).
    InvalidSetting {
        name: &'static str,
        value: String,
        reason: String,
    },
    /// The layout settings do not make a working layout.
    InvalidLayout { reason: String },
    /// The state file was written under another layout than the settings now give.
    LayoutChanged {
        recorded: String,
        configured: String,
    },
    /// An ID whose time lies past year 9999 (only possible with very long time fields).
    IdBeyondTimeField { id: i64, layout: Layout },
    /// A node id that does not fit the layout's node bits.
    NodeOutOfRange { node: i64, max: u32 },
    /// A sequence number that does not fit the layout's sequence bits.
    SequenceOutOfRange { seq: u32, max: u32 },
    /// Text that is not the base-32 form of an ID.
    InvalidBase32 { text: String, reason: String },
    /// A batch size outside 1..=max.
    BatchSizeOutOfRange { n: i32, max: i32 },
    /// A negative bigint was given where an ID was expected.
    NegativeId(i64),
    /// The time field has no room for the current time.
    TimeExhausted { end_unix_ms: i64 },
    /// The server's clock reads a time before the epoch and nothing was issued yet.
    ClockBeforeEpoch { now_unix_ms: i64 },
    /// `snowflake_nextval()` on a standby (or during crash recovery).
    InRecovery,
    /// Not an error: the system clock stepped back (reported as a WARNING, rate-limited).
    ClockSteppedBack { ms: i64 },
    /// The state file exists but does not hold a valid reservation.
    StateFileDamaged { path: &'static str, reason: String },
    /// The state file could not be read or written.
    StateFileIo {
        action: &'static str,
        path: &'static str,
        cause: String,
    },
    /// A WAL record of our resource manager that this version does not know.
    UnknownWalRecord,
    /// A timestamp before the epoch was given where an ID bound was asked for (`i64::MIN` stands
    /// for `-infinity`).
    TimestampBeforeEpoch { unix_ms: i64, layout: Layout },
    /// A timestamp after the end of the time field was given where an ID bound was asked for
    /// (`i64::MAX` stands for `infinity`).
    TimestampAfterEnd { unix_ms: i64, layout: Layout },
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
}

use SnowflakeError::*;

impl SnowflakeError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            NotPreloaded => PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            NodeUnset { .. } | LayoutChanged { .. } => PgSqlErrorCode::ERRCODE_CONFIG_FILE_ERROR,
            InvalidSetting { .. }
            | InvalidLayout { .. }
            | IdBeyondTimeField { .. }
            | NodeOutOfRange { .. }
            | SequenceOutOfRange { .. }
            | BatchSizeOutOfRange { .. }
            | NegativeId(_) => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            TimeExhausted { .. } => PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
            ClockBeforeEpoch { .. } => PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            InRecovery => PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            InvalidBase32 { .. } => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
            ClockSteppedBack { .. } => PgSqlErrorCode::ERRCODE_WARNING,
            StateFileDamaged { .. } => PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
            StateFileIo { .. } => PgSqlErrorCode::ERRCODE_IO_ERROR,
            UnknownWalRecord => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            TimestampBeforeEpoch { .. } | TimestampAfterEnd { .. } => {
                PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW
            }
            AdoptNoSuchColumn { .. } => PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
            AdoptNotInteger { .. } => PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            AdoptWouldCollide { .. } => PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        }
    }

    pub fn detail(&self) -> Option<String> {
        match self {
            NodeUnset { .. } => Some(
                "Every server needs its own node id so that IDs made on different servers \
                 never collide."
                    .into(),
            ),
            InvalidSetting { reason, .. } => Some(reason.clone()),
            InvalidLayout { reason } => Some(format!("The layout is invalid: {reason}.")),
            LayoutChanged {
                recorded,
                configured,
            } => Some(format!(
                "The state file records the layout \"{recorded}\"; the settings give \
                 \"{configured}\"."
            )),
            IdBeyondTimeField { layout, .. } => Some(format!(
                "IDs of the layout \"{}\" end at {}.",
                layout.describe(),
                format_unix_ms(layout.end_unix_ms())
            )),
            NegativeId(_) => Some("Snowflake IDs are positive: their sign bit is always 0.".into()),
            TimeExhausted { end_unix_ms } => Some(format!(
                "The time field of this layout ends at {}.",
                format_unix_ms(*end_unix_ms)
            )),
            ClockBeforeEpoch { now_unix_ms } => {
                Some(format!("The clock reads {}.", format_unix_ms(*now_unix_ms)))
            }
            ClockSteppedBack { .. } => Some(
                "pg_snowflake keeps making IDs from its own clock, which runs ahead of the system \
                 clock until that catches up; IDs stay unique and increasing."
                    .into(),
            ),
            StateFileDamaged { .. } | StateFileIo { .. } => Some(
                "The file holds this server's last reservation of snowflake IDs; without it the \
                 server could issue IDs it has issued before."
                    .into(),
            ),
            TimestampBeforeEpoch { layout, .. } => Some(format!(
                "Snowflake IDs count milliseconds from {}.",
                format_unix_ms(layout.epoch_unix_ms)
            )),
            TimestampAfterEnd { layout, .. } => Some(format!(
                "The time field of this layout ends at {}.",
                format_unix_ms(layout.end_unix_ms())
            )),
            AdoptWouldCollide { max, .. } => Some(format!(
                "Its largest value, {max}, is not below snowflake_from_timestamp(now()), the \
                 smallest ID a server can issue now."
            )),
            _ => None,
        }
    }

    pub fn hint(&self) -> String {
        match self {
            NotPreloaded => "Add pg_snowflake to shared_preload_libraries in postgresql.conf \
                             and restart the server."
                .into(),
            NodeUnset { max } => format!(
                "Add the line \"pg_snowflake.node_id = N\" to postgresql.conf, with N from 0 to \
                 {max} and different on every server, and restart the server."
            ),
            InvalidSetting { name, .. } => {
                format!("Correct {name} in postgresql.conf and start the server again.")
            }
            InvalidLayout { .. } => "Choose pg_snowflake.epoch, time_unit_ms, node_bits and \
                                     sequence_bits so that the time field covers the present; \
                                     see \"Layouts\" in pg_snowflake's README."
                .into(),
            LayoutChanged { .. } => "Restore the previous pg_snowflake layout settings. To start \
                                     a new ID space on purpose, move pg_snowflake.state out of \
                                     the data directory: IDs made before may then collide with \
                                     new ones or sort differently."
                .into(),
            IdBeyondTimeField { .. } => "Pass an ID made with this layout.".into(),
            NodeOutOfRange { max, .. } => format!("Node ids run from 0 to {max}."),
            SequenceOutOfRange { max, .. } => format!("Sequence numbers run from 0 to {max}."),
            NegativeId(_) => "Pass an ID made by snowflake_nextval().".into(),
            BatchSizeOutOfRange { max, .. } => {
                format!("Ask for 1 to {max} IDs at a time; call again for more.")
            }
            InvalidBase32 { .. } => "Pass the 13-character text snowflake_to_base32() makes \
                                     (digits 0-9 and letters except I, L, O and U)."
                .into(),
            TimeExhausted { .. } => {
                "No more IDs can be made with this layout and epoch; check the server's clock."
                    .into()
            }
            ClockBeforeEpoch { .. } => "Set the server's clock to the correct time.".into(),
            InRecovery => "Make IDs on the primary. A standby follows the primary's reservations \
                           through the WAL and makes IDs once it is promoted."
                .into(),
            ClockSteppedBack { .. } => "Check the server's time synchronisation.".into(),
            StateFileDamaged { .. } => "Restore the file from a backup of this data directory. \
                                        If you are certain the clock is past every ID this \
                                        server ever issued, move the file away and start the \
                                        server again."
                .into(),
            StateFileIo { .. } => "Check that the server's operating-system user can read and \
                                   write the file, and that the disk has free space."
                .into(),
            UnknownWalRecord => "The WAL was written by another version of pg_snowflake; \
                                 install that version to replay it."
                .into(),
            TimestampBeforeEpoch { layout, .. } | TimestampAfterEnd { layout, .. } => format!(
                "Pass a timestamp from {} to {}.",
                format_unix_ms(layout.epoch_unix_ms),
                format_unix_ms(layout.end_unix_ms())
            ),
            AdoptNoSuchColumn { .. } => {
                "Name the key column as the second argument, e.g. snowflake_adopt('orders', \
                 'order_id')."
                    .into()
            }
            AdoptNotInteger { .. } => {
                "snowflake_adopt switches smallint, integer and bigint columns to bigint \
                 snowflake IDs."
                    .into()
            }
            AdoptWouldCollide { .. } => "Renumber the rows below snowflake_from_timestamp(now()), \
                                         or keep the sequence for this table."
                .into(),
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

    /// Raises this error as FATAL: the process exits (at start-up, the server does not start).
    pub fn report_fatal(self) -> ! {
        self.raise_at(PgLogLevel::FATAL);
        unreachable!("a FATAL report does not return")
    }

    fn raise_at(self, level: PgLogLevel) {
        let mut report = ErrorReport::new(self.sqlstate(), self.to_string(), "pg_snowflake")
            .set_hint(self.hint());
        if let Some(detail) = self.detail() {
            report = report.set_detail(detail);
        }
        report.report(level);
    }
}

impl fmt::Display for SnowflakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotPreloaded => write!(
                f,
                "pg_snowflake must be loaded via shared_preload_libraries"
            ),
            NodeUnset { .. } => write!(f, "pg_snowflake.node_id is not set"),
            InvalidSetting { name, value, .. } => {
                write!(f, "invalid value for parameter \"{name}\": \"{value}\"")
            }
            InvalidLayout { .. } => write!(f, "invalid snowflake layout"),
            LayoutChanged { .. } => write!(
                f,
                "the snowflake layout differs from the one this server's IDs were made with"
            ),
            IdBeyondTimeField { id, .. } => {
                write!(f, "snowflake id {id} lies past the end of the time field")
            }
            NodeOutOfRange { node, max } => {
                write!(f, "node id {node} is out of range 0..{max}")
            }
            SequenceOutOfRange { seq, max } => {
                write!(f, "sequence number {seq} is out of range 0..{max}")
            }
            NegativeId(id) => write!(f, "snowflake id {id} is negative"),
            BatchSizeOutOfRange { n, max } => {
                write!(f, "batch size {n} is out of range 1..{max}")
            }
            InvalidBase32 { text, reason } => {
                write!(f, "invalid snowflake base-32 text \"{text}\": {reason}")
            }
            TimeExhausted { .. } => write!(f, "snowflake time field is exhausted"),
            ClockBeforeEpoch { .. } => {
                write!(f, "the server's clock is before the snowflake epoch")
            }
            InRecovery => write!(f, "cannot make snowflake IDs during recovery"),
            ClockSteppedBack { ms } => write!(f, "the system clock stepped back by {ms} ms"),
            StateFileDamaged { path, reason } => {
                write!(f, "pg_snowflake state file \"{path}\" is damaged: {reason}")
            }
            StateFileIo {
                action,
                path,
                cause,
            } => write!(
                f,
                "could not {action} pg_snowflake state file \"{path}\": {cause}"
            ),
            UnknownWalRecord => write!(f, "unknown pg_snowflake WAL record"),
            TimestampBeforeEpoch { unix_ms, .. } => write!(
                f,
                "timestamp {} is before the snowflake epoch",
                format_instant(*unix_ms)
            ),
            TimestampAfterEnd { unix_ms, .. } => write!(
                f,
                "timestamp {} is after the end of the snowflake time field",
                format_instant(*unix_ms)
            ),
            AdoptNoSuchColumn { table, column } => {
                write!(f, "column \"{column}\" of relation \"{table}\" does not exist")
            }
            AdoptNotInteger {
                table,
                column,
                type_name,
            } => write!(
                f,
                "column \"{column}\" of table \"{table}\" is of type {type_name}, not an integer type"
            ),
            AdoptWouldCollide { table, column, .. } => write!(
                f,
                "column \"{column}\" of table \"{table}\" holds values that snowflake IDs could repeat"
            ),
        }
    }
}

/// Formats an instant for a message; the `i64` extremes stand for Postgres' infinities.
fn format_instant(unix_ms: i64) -> String {
    match unix_ms {
        i64::MAX => "infinity".into(),
        i64::MIN => "-infinity".into(),
        _ => format_unix_ms(unix_ms),
    }
}

/// Turns a `Result` into its value or a Postgres ERROR, for the one-line SQL functions.
pub trait OrReport<T> {
    fn or_report(self) -> T;
}

impl<T> OrReport<T> for Result<T, SnowflakeError> {
    fn or_report(self) -> T {
        self.unwrap_or_else(|e| e.report())
    }
}
