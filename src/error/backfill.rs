//! The wording of `snowflake_nextval_at`'s refusals (`sql/backfill.rs`): IDs stamped at past
//! instants under the backfill node id, and the file and WAL record of its ceiling
//! (`reservation/backfill.rs`).

use super::catalogue::catalogue;
use snowflake_core::calendar::{format_instant, format_unix_ms};

/// The backfill ceiling's file, relative to the data directory.
pub const BACKFILL_FILE: &str = "pg_snowflake_backfill.state";

const NODE_RULE: &str = "pg_snowflake.backfill_node_id must name a node id that no server or \
                         application ever uses for live IDs, distinct per server, as node_id is.";

catalogue! {
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum BackfillError {
        NodeUnset { max: u32 } => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "pg_snowflake.backfill_node_id is not set"
            detail "IDs for past instants are made under a node id set aside for them: live IDs \
                    of any node id cover every instant from the epoch on."
            hint "Set pg_snowflake.backfill_node_id (0 to {max}) in postgresql.conf to a node id \
                  no server or application ever uses for live IDs, distinct per server, and \
                  restart the server." },
        NodeIsLive { node: u32 } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "pg_snowflake.backfill_node_id {node} is this server's live node id"
            detail "Live IDs of a node id cover every instant from the epoch on: an ID stamped at \
                    a past instant under it could equal one of them."
            hint { NODE_RULE } },
        NodeUsedBefore { node: u32 } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "pg_snowflake.backfill_node_id {node} made live IDs on this server before"
            detail "The server's state file lists it among the node ids used here: an ID stamped \
                    at a past instant under it could equal one of them."
            hint { NODE_RULE } },
        /// The backfill node id is past the layout's last (a layout narrower than the setting's).
        NodeOutOfRange { node: u32, max: u32 } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "pg_snowflake.backfill_node_id {node} is out of the layout's range"
            detail "This layout's node ids run from 0 to {max}."
            hint { NODE_RULE } },
        Future { unix_ms: i64 } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message ("timestamp {} is in the future", format_instant(*unix_ms))
            detail "snowflake_nextval_at stamps IDs at past instants only; the present and the \
                    future belong to snowflake_nextval()."
            hint "Pass an instant not after now(), or use snowflake_nextval() for new rows." },
        BeforeEpoch { unix_ms: i64, epoch_unix_ms: i64 } => { ERROR ERRCODE_DATETIME_FIELD_OVERFLOW
            message ("timestamp {} is before the snowflake epoch", format_instant(*unix_ms))
            detail ("Snowflake IDs count time from {}.", format_unix_ms(*epoch_unix_ms))
            hint "Rows older than the epoch cannot be stamped at their instant: key them at the \
                  epoch, or choose an earlier pg_snowflake.epoch for a new cluster." },
        BelowCursor { unix_ms: i64, cursor_unix_ms: i64 } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("timestamp {} is before the backfill cursor", format_instant(*unix_ms))
            detail ("This server has stamped an ID at {} since it started; instants passed to \
                     snowflake_nextval_at must not decrease, across every session.",
                    format_unix_ms(*cursor_unix_ms))
            hint "Re-key rows in ascending order of their instant, one backfill at a time (ORDER \
                  BY the timestamp); after a restart the cursor starts afresh." },
        Exhausted { unix_ms: i64, node: u32, first: u64, max: u32 } => {
            ERROR ERRCODE_PROGRAM_LIMIT_EXCEEDED
            message ("no snowflake sequence number is left at {} for backfill node id {node}",
                     format_instant(*unix_ms))
            detail { Some(if *first == 0 {
                format!("Sequence numbers 0 to {max} of this instant are used; an ID is never \
                         stamped at another instant than the one asked for.")
            } else if *first > u64::from(*max) {
                format!("Every sequence number (0 to {max}) went to earlier runs of the backfill \
                         (each restart sets aside those it may have used, at every instant).")
            } else {
                format!("Sequence numbers {first} to {max} of this instant are used; those below \
                         {first} went to earlier runs of the backfill (each restart sets aside \
                         those it may have used, at every instant).")
            }) }
            hint "Set pg_snowflake.backfill_node_id to another node id never used for live IDs, \
                  restart, and continue; or key the remaining rows of this instant with \
                  snowflake_nextval()." },
        InRecovery => { ERROR ERRCODE_READ_ONLY_SQL_TRANSACTION
            message "cannot make snowflake IDs for past instants during recovery"
            hint "Re-key rows on the primary. A standby follows the backfill's ceiling through \
                  the WAL and continues it once promoted." },
        FileIo { action: &'static str, cause: String } => { ERROR ERRCODE_IO_ERROR
            message "could not {action} the backfill file \"{BACKFILL_FILE}\": {cause}"
            detail "The file holds the sequence numbers the backfill has used; without it the \
                    server could stamp an ID it has stamped before."
            hint "Check the data directory's disk and permissions. A damaged file is not \
                  replaced: restore it from a backup, or set pg_snowflake.backfill_node_id to a \
                  node id never used before." },
        AwaitingOldFile => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "this data directory was made by pg_upgrade without its backfill file"
            detail "pg_upgrade does not copy \"{BACKFILL_FILE}\", which holds the sequence \
                    numbers the old server's backfill used; without it this server could stamp \
                    IDs at past instants that the old one stamped."
            hint "Stop the server, copy \"{BACKFILL_FILE}\" from the old data directory into this \
                  one, and start the server again. If the old server never ran \
                  snowflake_nextval_at (it has no such file), delete this directory's \
                  \"{BACKFILL_FILE}\" instead." },
        WriteInterrupted => { ERROR ERRCODE_QUERY_CANCELED
            message "the backfill's ceiling was not confirmed by the synchronous standbys"
            detail "The call was cancelled or terminated before the ceiling was confirmed: no ID \
                    under it is made."
            hint "Call again." },
    }
}
