//! `snowflake_nextval_at(timestamptz)`: an ID stamped at a past instant, for re-keying old rows
//! (backfill). The rules are the core's (`snowflake_core::backfill`: the cursor, the ceiling);
//! the ceiling's file and WAL record are `reservation/backfill.rs`'s; the cursor lives in shared
//! memory (`shmem::Handle::backfill`). This file checks the settings and glues them together.

use super::timestamps::unix_ms;
use crate::error::{BackfillError, OrReport, SnowflakeError};
use crate::gucs;
use crate::reservation::backfill;
use crate::shmem;
use pgrx::prelude::*;
use snowflake_core::backfill::{check_node, NodeRefusal, Refusal, Step};
use snowflake_core::clock::wall_now;
use snowflake_core::layout::Parts;
use snowflake_core::Error as CoreError;

/// A snowflake ID stamped at `ts` (it decodes to `ts` truncated to the layout's time unit) under
/// `pg_snowflake.backfill_node_id`, unique against every ID the fleet makes when that node id is
/// used for nothing else. Instants must not decrease while the server runs (see
/// docs/GUIDE.md). STRICT: NULL gives NULL.
#[pg_extern(volatile, strict, parallel_unsafe)]
fn snowflake_nextval_at(ts: TimestampWithTimeZone) -> i64 {
    let result = next_at(unix_ms(ts));
    if let Err(SnowflakeError::Backfill(BackfillError::WriteInterrupted)) = result {
        // A cancel or terminate ended the standbys' wait: it is what the caller asked for.
        pg_sys::check_for_interrupts!();
    }
    result.or_report()
}

fn next_at(unix_ms: i64) -> Result<i64, SnowflakeError> {
    let shm = shmem::get()?;
    // SAFETY: a plain read of the server's recovery state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        return Err(BackfillError::InRecovery.into());
    }
    let layout = gucs::layout();
    let Some(node) = gucs::backfill_node() else {
        return Err(BackfillError::NodeUnset {
            max: layout.max_node(),
        }
        .into());
    };
    // This server's live node id: the setting, or the registry's claim; and the node ids its
    // state file says it used before.
    let (live, used_before) = shm.shared(|issuer| {
        let (state, _) = issuer.state();
        let claimed = state.identity.map(|_| state.id);
        (
            gucs::configured_node().or(claimed),
            state.history.covers(node),
        )
    });
    check_node(layout, node, live, used_before).map_err(|refusal| match refusal {
        NodeRefusal::OutOfRange { node, max } => BackfillError::NodeOutOfRange { node, max },
        NodeRefusal::Live { node } => BackfillError::NodeIsLive { node },
        NodeRefusal::UsedBefore { node } => BackfillError::NodeUsedBefore { node },
    })?;
    let now = wall_now();
    shm.backfill(|cursor| {
        if !cursor.runs_for(node) {
            cursor.begin(node, backfill::load(layout)?.of(node));
        }
        loop {
            match cursor.next(layout, unix_ms, now) {
                Ok(Step::Issue { tick, seq }) => {
                    return Ok(layout.pack(Parts {
                        time: tick,
                        node,
                        seq,
                    }))
                }
                Ok(Step::Reserve { node, ceiling }) => {
                    if !backfill::raise(layout, node, ceiling)? {
                        return Err(BackfillError::WriteInterrupted.into());
                    }
                    cursor.reserved(ceiling);
                }
                Err(refusal) => return Err(refused(refusal, node, layout)),
            }
        }
    })
}

fn refused(refusal: Refusal, node: u32, layout: &snowflake_core::layout::Layout) -> SnowflakeError {
    match refusal {
        Refusal::Future { unix_ms, .. } => BackfillError::Future { unix_ms }.into(),
        Refusal::BeforeEpoch {
            unix_ms,
            epoch_unix_ms,
        } => BackfillError::BeforeEpoch {
            unix_ms,
            epoch_unix_ms,
        }
        .into(),
        Refusal::AfterEnd { unix_ms } => CoreError::TimestampAfterEnd {
            unix_ms,
            field: layout.time_field(),
        }
        .into(),
        Refusal::BelowCursor {
            unix_ms,
            cursor_unix_ms,
        } => BackfillError::BelowCursor {
            unix_ms,
            cursor_unix_ms,
        }
        .into(),
        Refusal::Exhausted {
            unix_ms,
            first,
            max,
        } => BackfillError::Exhausted {
            unix_ms,
            node,
            first,
            max,
        }
        .into(),
    }
}

extension_sql_file!(
    "../../sql/install/backfill_comment.sql",
    name = "backfill_comment",
    requires = [snowflake_nextval_at],
);
