//! The one error type of the extension, and the one place where every user-visible message is
//! worded.
//!
//! Every variant — errors, and the NOTICEs and WARNINGs the extension raises — is described
//! once, in [`SnowflakeError::message`] (the core's in `core_errors.rs`, `snowflake_adopt`'s in
//! `adopt.rs`): its SQLSTATE, message (Postgres style: lower case, no
//! trailing period), detail and hint side by side. The core's errors ([`CoreError`]) are data;
//! they are worded here too. Text a user typed is shown as a bounded prefix (see [`quoted`]),
//! so no input can make a message, or a line of the server log, larger than a few hundred bytes.
//! The golden tests in `pgrx-tests/golden` assert each text word for word.

mod adopt;
mod backfill;
mod core_errors;
mod registry;
mod report;

pub use adopt::AdoptError;
pub use backfill::{BackfillError, BACKFILL_FILE};
pub use registry::{refusal_error as registry_refusal_error, RegistryError};
pub use report::{Message, OrReport};

use pgrx::PgSqlErrorCode::*;
use report::{message, quoted};
use snowflake_core::Error as CoreError;

/// The state file, relative to the data directory (every Postgres process's working directory).
pub const STATE_FILE: &str = "pg_snowflake.state";

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
    /// `snowflake_watermark()` on a standby: it cannot know which of the primary's transactions
    /// that drew IDs are still open.
    WatermarkInRecovery,
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
    StateFileNotCopied { path: &'static str },
    /// pg_upgrade loads the library into a new cluster that does not preload it, so nothing
    /// would mark the new data directory as awaiting the old state file.
    NotPreloadedForUpgrade,
    /// A WAL record of our resource manager that this version does not know.
    UnknownWalRecord,
    /// A refusal or notice of `snowflake_adopt`.
    Adopt(AdoptError),
    /// A refusal, warning or log line of the node-id registry.
    Registry(RegistryError),
    /// A refusal of `snowflake_nextval_at`.
    Backfill(BackfillError),
    /// LOG: with a registry to give a fresh node id, a damaged state file was moved aside.
    DamagedStateFileMovedAside {
        path: &'static str,
        aside: &'static str,
        reason: String,
    },
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

impl From<AdoptError> for SnowflakeError {
    fn from(error: AdoptError) -> Self {
        SnowflakeError::Adopt(error)
    }
}

impl From<BackfillError> for SnowflakeError {
    fn from(error: BackfillError) -> Self {
        SnowflakeError::Backfill(error)
    }
}

impl From<RegistryError> for SnowflakeError {
    fn from(error: RegistryError) -> Self {
        SnowflakeError::Registry(error)
    }
}

const STATE_FILE_DETAIL: &str = "The file holds this server's last reservation of snowflake IDs; \
                                 without it the server could issue IDs it has issued before.";

impl SnowflakeError {
    /// The SQLSTATE, message, detail and hint of every variant, side by side.
    pub fn message(&self) -> Message {
        use SnowflakeError::*;
        match self {
            Core(error) => core_errors::message_of(error),
            Adopt(error) => adopt::message_of(error),
            Registry(error) => registry::message_of(error),
            Backfill(error) => backfill::message_of(error),
            DamagedStateFileMovedAside {
                path,
                aside,
                reason,
            } => message(
                ERRCODE_WARNING,
                format!(
                    "pg_snowflake state file \"{path}\" is damaged ({reason}): moved to \
                     \"{aside}\"; the registry is asked for a node id this server did not use"
                ),
                Some(
                    "The node ids this server used are known to a registry it claimed from \
                     before: it gives none of them below their IDs. A registry that has never \
                     seen this server cannot know them, and refuses it."
                        .into(),
                ),
                "Keep the moved file for inspection. If the registry refuses this server, \
                 restore the state file from a backup.",
            ),
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
            WatermarkInRecovery => message(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "cannot take a snowflake watermark during recovery",
                Some(
                    "A standby does not know which of its primary's transactions that drew IDs \
                     are still open."
                        .into(),
                ),
                "Take the watermark on the primary and poll the primary; or read on the standby \
                 with the primary's watermark once pg_last_wal_replay_lsn() has passed the \
                 primary's pg_current_wal_lsn() taken after it.",
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
            StateFileNotCopied { path } => message(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "this data directory was made by pg_upgrade without its pg_snowflake state file",
                Some(format!(
                    "pg_upgrade does not copy \"{path}\", which holds the old server's last \
                     reservation of snowflake IDs; without it this server could issue IDs the \
                     old one issued."
                )),
                format!(
                    "Stop the server, copy \"{path}\" from the old data directory into this one, \
                     and start the server again. If this directory holds \"{path}.before-upgrade\", \
                     that is a reservation this cluster made itself before pg_upgrade: keep it, \
                     and copy the old directory's file. Delete this directory's \"{path}\" only if \
                     no server before it ever made snowflake IDs."
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
            Internal { context, cause } => message(
                ERRCODE_INTERNAL_ERROR,
                format!("{context}: {cause}"),
                None,
                "This is a bug in pg_snowflake; please report it with the statement that \
                 caused it.",
            ),
        }
    }

    /// The error of a failed state-file write, from its OS error number (0: unknown).
    pub fn state_file_write(errno: i32) -> SnowflakeError {
        let cause = if errno == 0 {
            std::io::Error::other("unknown error")
        } else {
            std::io::Error::from_raw_os_error(errno)
        };
        SnowflakeError::StateFileIo {
            action: "write",
            path: STATE_FILE,
            cause: cause.to_string(),
        }
    }
}

#[cfg(test)]
mod tests;
