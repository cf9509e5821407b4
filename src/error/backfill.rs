//! The wording of `snowflake_nextval_at`'s refusals (`sql/backfill.rs`): IDs stamped at past
//! instants under the backfill node id, and the file and WAL record of its ceiling
//! (`reservation/backfill.rs`).

use super::report::{message, Message};
use pgrx::PgSqlErrorCode::*;
use snowflake_core::calendar::{format_instant, format_unix_ms};

/// The backfill ceiling's file, relative to the data directory.
pub const BACKFILL_FILE: &str = "pg_snowflake_backfill.state";

/// What `snowflake_nextval_at` refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackfillError {
    /// `pg_snowflake.backfill_node_id` is unset.
    NodeUnset { max: u32 },
    /// The backfill node id is this server's live node id.
    NodeIsLive { node: u32 },
    /// This server made live IDs under the backfill node id before (its state file says so).
    NodeUsedBefore { node: u32 },
    /// The backfill node id is past the layout's last (a layout narrower than the setting's).
    NodeOutOfRange { node: u32, max: u32 },
    /// The instant lies after this server's clock.
    Future { unix_ms: i64 },
    /// The instant lies before the layout's epoch.
    BeforeEpoch { unix_ms: i64, epoch_unix_ms: i64 },
    /// The instant lies before the cursor (the last instant stamped since the server started).
    BelowCursor { unix_ms: i64, cursor_unix_ms: i64 },
    /// Every sequence number of the instant's tick is used.
    Exhausted {
        unix_ms: i64,
        node: u32,
        first: u64,
        max: u32,
    },
    /// On a standby (or during recovery).
    InRecovery,
    /// The ceiling's file could not be read or written, or is damaged.
    FileIo { action: &'static str, cause: String },
    /// The ceiling's write was interrupted before the synchronous standbys confirmed it.
    WriteInterrupted,
}

const NODE_RULE: &str = "pg_snowflake.backfill_node_id must name a node id that no server or \
                         application ever uses for live IDs, distinct per server, as node_id is.";

pub(super) fn message_of(error: &BackfillError) -> Message {
    use BackfillError::*;
    match error {
        NodeUnset { max } => message(
            ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "pg_snowflake.backfill_node_id is not set",
            Some(
                "IDs for past instants are made under a node id set aside for them: live IDs of \
                 any node id cover every instant from the epoch on."
                    .into(),
            ),
            format!(
                "Set pg_snowflake.backfill_node_id (0 to {max}) in postgresql.conf to a node id \
                 no server or application ever uses for live IDs, distinct per server, and \
                 restart the server."
            ),
        ),
        NodeIsLive { node } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("pg_snowflake.backfill_node_id {node} is this server's live node id"),
            Some(
                "Live IDs of a node id cover every instant from the epoch on: an ID stamped at a \
                 past instant under it could equal one of them."
                    .into(),
            ),
            NODE_RULE,
        ),
        NodeUsedBefore { node } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("pg_snowflake.backfill_node_id {node} made live IDs on this server before"),
            Some(
                "The server's state file lists it among the node ids used here: an ID stamped at \
                 a past instant under it could equal one of them."
                    .into(),
            ),
            NODE_RULE,
        ),
        NodeOutOfRange { node, max } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("pg_snowflake.backfill_node_id {node} is out of the layout's range"),
            Some(format!("This layout's node ids run from 0 to {max}.")),
            NODE_RULE,
        ),
        Future { unix_ms } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("timestamp {} is in the future", format_instant(*unix_ms)),
            Some(
                "snowflake_nextval_at stamps IDs at past instants only; the present and the \
                 future belong to snowflake_nextval()."
                    .into(),
            ),
            "Pass an instant not after now(), or use snowflake_nextval() for new rows.",
        ),
        BeforeEpoch {
            unix_ms,
            epoch_unix_ms,
        } => message(
            ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!(
                "timestamp {} is before the snowflake epoch",
                format_instant(*unix_ms)
            ),
            Some(format!(
                "Snowflake IDs count time from {}.",
                format_unix_ms(*epoch_unix_ms)
            )),
            "Rows older than the epoch cannot be stamped at their instant: key them at the \
             epoch, or choose an earlier pg_snowflake.epoch for a new cluster.",
        ),
        BelowCursor {
            unix_ms,
            cursor_unix_ms,
        } => message(
            ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "timestamp {} is before the backfill cursor",
                format_instant(*unix_ms)
            ),
            Some(format!(
                "This server has stamped an ID at {} since it started; instants passed to \
                 snowflake_nextval_at must not decrease, across every session.",
                format_unix_ms(*cursor_unix_ms)
            )),
            "Re-key rows in ascending order of their instant, one backfill at a time (ORDER BY \
             the timestamp); after a restart the cursor starts afresh.",
        ),
        Exhausted {
            unix_ms,
            node,
            first,
            max,
        } => message(
            ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!(
                "no snowflake sequence number is left at {} for backfill node id {node}",
                format_instant(*unix_ms)
            ),
            Some(if *first == 0 {
                format!(
                    "Sequence numbers 0 to {max} of this instant are used; an ID is never \
                     stamped at another instant than the one asked for."
                )
            } else if *first > u64::from(*max) {
                format!(
                    "Every sequence number (0 to {max}) went to earlier runs of the backfill \
                     (each restart sets aside those it may have used, at every instant)."
                )
            } else {
                format!(
                    "Sequence numbers {first} to {max} of this instant are used; those below \
                     {first} went to earlier runs of the backfill (each restart sets aside \
                     those it may have used, at every instant)."
                )
            }),
            "Set pg_snowflake.backfill_node_id to another node id never used for live IDs, \
             restart, and continue; or key the remaining rows of this instant with \
             snowflake_nextval().",
        ),
        InRecovery => message(
            ERRCODE_READ_ONLY_SQL_TRANSACTION,
            "cannot make snowflake IDs for past instants during recovery",
            None,
            "Re-key rows on the primary. A standby follows the backfill's ceiling through the \
             WAL and continues it once promoted.",
        ),
        FileIo { action, cause } => message(
            ERRCODE_IO_ERROR,
            format!("could not {action} the backfill file \"{BACKFILL_FILE}\": {cause}"),
            Some(
                "The file holds the sequence numbers the backfill has used; without it the \
                 server could stamp an ID it has stamped before."
                    .into(),
            ),
            "Check the data directory's disk and permissions. A damaged file is not replaced: \
             restore it from a backup, or set pg_snowflake.backfill_node_id to a node id never \
             used before.",
        ),
        WriteInterrupted => message(
            ERRCODE_QUERY_CANCELED,
            "the backfill's ceiling was not confirmed by the synchronous standbys",
            Some(
                "The call was cancelled or terminated before the ceiling was confirmed: no ID \
                 under it is made."
                    .into(),
            ),
            "Call again.",
        ),
    }
}

/// How many variants [`BackfillError`] has (for the catalogue's test of every variant).
#[cfg(test)]
pub(super) const VARIANTS: usize = 11;

/// Which variant `error` is, from 0 to `VARIANTS - 1` (exhaustive: a new variant needs one).
#[cfg(test)]
pub(super) fn number(error: &BackfillError) -> usize {
    use BackfillError::*;
    match error {
        NodeUnset { .. } => 0,
        NodeIsLive { .. } => 1,
        NodeUsedBefore { .. } => 2,
        NodeOutOfRange { .. } => 3,
        Future { .. } => 4,
        BeforeEpoch { .. } => 5,
        BelowCursor { .. } => 6,
        Exhausted { .. } => 7,
        InRecovery => 8,
        FileIo { .. } => 9,
        WriteInterrupted => 10,
    }
}

/// At least one example of every variant (each form of those whose wording branches).
#[cfg(test)]
pub(super) fn examples() -> Vec<BackfillError> {
    use BackfillError::*;
    let exhausted = |first| Exhausted {
        unix_ms: 1_704_067_200_000,
        node: 1000,
        first,
        max: 4095,
    };
    vec![
        NodeUnset { max: 1023 },
        NodeIsLive { node: 1 },
        NodeUsedBefore { node: 2 },
        NodeOutOfRange {
            node: 1000,
            max: 15,
        },
        Future { unix_ms: i64::MAX },
        BeforeEpoch {
            unix_ms: 0,
            epoch_unix_ms: 1_704_067_200_000,
        },
        BelowCursor {
            unix_ms: 1_704_067_200_000,
            cursor_unix_ms: 1_704_067_200_001,
        },
        exhausted(0),
        exhausted(16),
        exhausted(4096),
        InRecovery,
        FileIo {
            action: "read",
            cause: "Permission denied".into(),
        },
        WriteInterrupted,
    ]
}
