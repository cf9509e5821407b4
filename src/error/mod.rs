//! The one error type of the extension, and the one place where every user-visible message is
//! worded: a catalogue, one row per variant (level, SQLSTATE, message, detail, hint), in the
//! spirit of PostgreSQL's `errcodes.txt`; [`catalogue!`](catalogue) makes each enum and its
//! `message()` from its rows. A family is a file: the server's own here, the core's in
//! `core_errors.rs` (the core's errors are data), `snowflake_adopt`'s in `adopt.rs`,
//! `snowflake_nextval_at`'s in `backfill.rs`, the registry's in `registry.rs`. Text a user typed
//! is shown as a bounded prefix ([`quoted`]), so no input can make a message, or a line of the
//! server log, larger than a few hundred bytes. Adding an error or a family: CONTRIBUTING.md;
//! `tests.rs` fails until every row has an example and a row in docs/ERRORS.md.

mod adopt;
mod backfill;
mod catalogue;
mod core_errors;
mod registry;
mod report;

pub use adopt::AdoptError;
pub use backfill::{BackfillError, BACKFILL_FILE};
pub use registry::RegistryError;
pub use report::{Message, OrReport};

use catalogue::catalogue;
use report::quoted;
use snowflake_core::Error as CoreError;

/// The state file, relative to the data directory (every Postgres process's working directory).
pub const STATE_FILE: &str = "pg_snowflake.state";

const STATE_FILE_DETAIL: &str = "The file holds this server's last reservation of snowflake IDs; \
                                 without it the server could issue IDs it has issued before.";

catalogue! {
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum SnowflakeError {
        Core(error: CoreError) => [core_errors::message_of(error), core_errors::rows()],
        Adopt(error: AdoptError) => [error.message(), AdoptError::rows()],
        Registry(error: RegistryError) => [error.message(), RegistryError::rows()],
        Backfill(error: BackfillError) => [error.message(), BackfillError::rows()],
        NotPreloaded => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "pg_snowflake must be loaded via shared_preload_libraries"
            hint "Add pg_snowflake to shared_preload_libraries in postgresql.conf and restart the \
                  server." },
        NodeUnset { max: u32 } => { ERROR ERRCODE_CONFIG_FILE_ERROR
            message "pg_snowflake.node_id is not set"
            detail "Every server needs its own node id so that IDs made on different servers \
                    never collide."
            hint "Add the line \"pg_snowflake.node_id = N\" to postgresql.conf, with N from 0 \
                  to {max} and different on every server, and restart the server." },
        InvalidSetting { name: &'static str, value: String, reason: String } => {
            ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message ("invalid value for parameter \"{name}\": {}", quoted(value))
            detail "{reason}"
            hint "Correct {name} in postgresql.conf and start the server again." },
        InRecovery => { ERROR ERRCODE_READ_ONLY_SQL_TRANSACTION
            message "cannot make snowflake IDs during recovery"
            hint "Make IDs on the primary. A standby follows the primary's reservations through \
                  the WAL and makes IDs once it is promoted." },
        WatermarkInRecovery => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "cannot take a snowflake watermark during recovery"
            detail "A standby does not know which of its primary's transactions that drew IDs \
                    are still open."
            hint "Take the watermark on the primary and poll the primary; or read on the standby \
                  with the primary's watermark once pg_last_wal_replay_lsn() has passed the \
                  primary's pg_current_wal_lsn() taken after it." },
        RenewerNotRunning => { LOG ERRCODE_WARNING // once per backend
            message "the pg_snowflake renewer is not running: backends write the generator's \
                     reservations themselves"
            detail "IDs stay unique and durable, but a call that renews the reservation waits \
                    for the disk, and for the synchronous standbys, while it does."
            hint "Check the server log from start-up for why the background worker \
                  \"pg_snowflake renewer\" is not running; it needs a free slot of \
                  max_worker_processes." },
        ClockSteppedBack { ms: i64 } => { WARNING ERRCODE_WARNING // rate-limited
            message "the system clock stepped back by {ms} ms"
            detail "pg_snowflake keeps making IDs from its own clock, which runs ahead of the \
                    system clock until that catches up; IDs stay unique and increasing."
            hint "Check the server's time synchronisation." },
        ClockJumpHeld { ms: i64, confirm_s: i64 } => { WARNING ERRCODE_WARNING
            message "the system clock leapt {ms} ms ahead of the monotonic clock"
            detail "pg_snowflake keeps making IDs from the monotonic clock's account of time, \
                    and follows the system clock only if it keeps the lead for {confirm_s} \
                    seconds; IDs stay unique and increasing."
            hint "Check the server's time synchronisation and its hardware clock." },
        ClockJumpFollowed { ms: i64 } => { WARNING ERRCODE_WARNING
            message "the system clock kept a lead of {ms} ms: pg_snowflake follows it now"
            detail "IDs are stamped with the system clock's time again; a lead that was not \
                    real stays in the IDs made since and in the durable reservation."
            hint "If the system clock is wrong, set it right; if IDs then run ahead of it, give \
                  the server a node id it never used (see the README on forward clock steps)." },
        NodeSwitched { from: Option<u32>, to: u32, lead_dropped: bool } => { LOG ERRCODE_WARNING
            message ("pg_snowflake's node id {}", match from {
                Some(from) => format!("changed from {from} to {to}"),
                None => format!("is {to}; the state file does not say which node id its \
                                 reservation was made for") })
            detail { Some(if *lead_dropped {
                format!("Node id {to} never issued IDs on this server, so it owes nothing to the \
                         reservations of the node ids that did: any lead they had over the clock \
                         is dropped. Their highest reservation is kept in the state file.")
            } else {
                format!("Node id {to} may have issued IDs on this server before: it resumes above \
                         the highest reservation made here.")
            }) }
            hint "Every server needs a node id no other server uses or used." },
        ReservationsFailing { cause: String, not_logged: u64 } => { WARNING ERRCODE_IO_ERROR
            message "could not write pg_snowflake's reservation: {cause}"
            detail "Calls that need a new reservation fail until one is written; the renewer \
                    tries again after at most half a second. {not_logged} more failures were \
                    not logged since the last message."
            hint "Check that the disk has free space and the server's operating-system user can \
                  write the data directory." },
        OwnReservationMovedAside { path: &'static str, aside: &'static str } => { // and marked
            LOG ERRCODE_WARNING
            message "pg_upgrade: \"{path}\" was written by this new cluster before pg_upgrade, \
                     moved to \"{aside}\""
            detail "It holds the new cluster's own reservation, not the old server's: kept, it \
                    would let the upgraded server issue IDs the old one issued."
            hint "After pg_upgrade, copy \"{path}\" from the old data directory into this one \
                  before the first snowflake ID is made." },
        StateFileDamaged { path: &'static str, reason: String } => { ERROR ERRCODE_DATA_CORRUPTED
            message "pg_snowflake state file \"{path}\" is damaged: {reason}"
            detail "{STATE_FILE_DETAIL}"
            hint "Restore the file from a backup of this data directory. If you are certain the \
                  clock is past every ID this server ever issued, move the file away and start \
                  the server again." },
        StateFileIo { action: &'static str, path: &'static str, cause: String } => {
            ERROR ERRCODE_IO_ERROR
            message "could not {action} pg_snowflake state file \"{path}\": {cause}"
            detail "{STATE_FILE_DETAIL}"
            hint "Check that the server's operating-system user can read and write the file, and \
                  that the disk has free space." },
        StateFileNotCopied { path: &'static str } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "this data directory was made by pg_upgrade without its pg_snowflake state \
                     file"
            detail "pg_upgrade does not copy \"{path}\", which holds the old server's last \
                    reservation of snowflake IDs; without it this server could issue IDs the \
                    old one issued."
            hint "Stop the server, copy \"{path}\" from the old data directory into this one, \
                  and start the server again. If this directory holds \"{path}.before-upgrade\", \
                  that is a reservation this cluster made itself before pg_upgrade: keep it, \
                  and copy the old directory's file. Delete this directory's \"{path}\" only if \
                  no server before it ever made snowflake IDs." },
        NotPreloadedForUpgrade => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "pg_snowflake must be in shared_preload_libraries of the new cluster while \
                     pg_upgrade runs"
            detail "Preloaded, pg_snowflake marks the new data directory as awaiting the old \
                    server's state file; without the mark, the upgraded server would forget \
                    every ID the old one issued."
            hint "Add pg_snowflake to shared_preload_libraries, and copy every pg_snowflake \
                  setting of the old cluster, into the new cluster's postgresql.conf; then run \
                  pg_upgrade again." },
        UnknownWalRecord => { ERROR ERRCODE_INTERNAL_ERROR
            message "unknown pg_snowflake WAL record"
            hint "The WAL was written by another version of pg_snowflake; install that version \
                  to replay it." },
        DamagedStateFileMovedAside { path: &'static str, aside: &'static str, reason: String } => {
            LOG ERRCODE_WARNING
            message "pg_snowflake state file \"{path}\" is damaged ({reason}): moved to \
                     \"{aside}\"; the registry is asked for a node id this server did not use"
            detail "The node ids this server used are known to a registry it claimed from \
                    before: it gives none of them below their IDs. A registry that has never \
                    seen this server cannot know them, and refuses it."
            hint "Keep the moved file for inspection. If the registry refuses this server, \
                  restore the state file from a backup." },
        Internal { context: &'static str, cause: String } => { ERROR ERRCODE_INTERNAL_ERROR
            message "{context}: {cause}"
            hint "This is a bug in pg_snowflake; please report it with the statement that \
                  caused it." },
    }
}

#[cfg(test)]
mod tests;
