//! Where the backfill's ceiling is kept (`snowflake_nextval_at`; the rules are the core's
//! `backfill`): its file `pg_snowflake_backfill.state` in the data directory, one ceiling per
//! backfill node id ever used here, and the WAL record "backfill" of each raise, so that a
//! standby, once promoted, begins its runs above every sequence number its primary used. Written
//! like the reservation (`store.rs`): the file first (temporary file, fsync, rename, directory
//! fsync), then the record, flushed, then the wait for the synchronous standbys; both under the
//! backfill lock (`shmem::Handle::backfill`), by the backend that needs the raise. A damaged or
//! unreadable file refuses the backfill; it never silently starts from nothing.

use super::renew::{with_synchronous_commit_on, CancelsHeldBack};
use super::store::{replace_file, RMGR_ID};
use crate::error::{BackfillError, SnowflakeError, BACKFILL_FILE};
use crate::pg::xlog_register_data;
use pgrx::pg_sys;
use snowflake_core::backfill::{self, Ceilings, Record};
use snowflake_core::layout::Layout;
use std::io::ErrorKind;

/// The record type "backfill" of our resource manager (payload: `snowflake_core::backfill`).
pub const XLOG_BACKFILL: u8 = 0x20;

const BACKFILL_FILE_TMP: &str = "pg_snowflake_backfill.state.tmp";

fn io_error(action: &'static str, e: &std::io::Error) -> SnowflakeError {
    BackfillError::FileIo {
        action,
        cause: e.to_string(),
    }
    .into()
}

/// The ceilings recorded in this data directory for `layout` (none yet: an empty list). A file
/// of another layout is refused as the state file is (IDs of two layouts do not mix), and so is
/// the upgrade marker (`mark_if_missing`).
pub fn load(layout: &Layout) -> Result<Ceilings, SnowflakeError> {
    let text = match std::fs::read_to_string(BACKFILL_FILE) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Ceilings::new(*layout)),
        Err(e) => return Err(io_error("read", &e)),
    };
    if text == backfill::UPGRADE_MARKER {
        return Err(BackfillError::AwaitingOldFile.into());
    }
    let ceilings = Ceilings::parse(&text).map_err(|reason| BackfillError::FileIo {
        action: "read",
        cause: format!("it is damaged: {reason}"),
    })?;
    ceilings.layout.check_same(layout)?;
    Ok(ceilings)
}

/// pg_upgrade's start into this data directory (`store::start_state`): pg_upgrade copies no
/// file of ours, so a missing file becomes the upgrade marker, and the backfill refuses until
/// the old directory's file is copied over it. Without the marker the upgraded server would
/// start every instant's sequence numbers from 0 again, repeating the old server's backfill.
pub fn mark_if_missing() -> Result<(), SnowflakeError> {
    match std::fs::metadata(BACKFILL_FILE) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => replace_file(
            BACKFILL_FILE,
            BACKFILL_FILE_TMP,
            backfill::UPGRADE_MARKER.as_bytes(),
        )
        .map_err(|e| io_error("write", &e)),
        Err(e) => Err(io_error("read", &e)),
    }
}

/// Raises the ceiling of backfill node id `node` to `ceiling`, durably: the file, then the WAL
/// record, flushed and confirmed by the synchronous standbys. Called under the backfill lock
/// (which holds interrupts), on a primary. `Ok(false)`: a cancel was pending before the write,
/// or a terminate came during the standbys' wait, so the raise must not count (the caller makes
/// no ID under it).
///
/// A cancel (and statement_timeout, which cancels with SIGINT) is held back while the standbys
/// are waited for, as for a backend writing its own reservation (`renew::renew_here`):
/// SyncRepWaitForLSN answers a cancel by clearing it and returning unconfirmed, which nothing
/// after it could tell from a confirmation. The cancel is delivered once the write is over.
pub fn raise(layout: &Layout, node: u32, ceiling: u64) -> Result<bool, SnowflakeError> {
    let _cancels = CancelsHeldBack::new();
    // SAFETY: plain reads of flags set by signal handlers; SIGINT cannot run now.
    if unsafe { pg_sys::QueryCancelPending != 0 || pg_sys::ProcDiePending != 0 } {
        return Ok(false);
    }
    let mut ceilings = load(layout)?;
    if ceilings.raise(node, ceiling) {
        replace_file(
            BACKFILL_FILE,
            BACKFILL_FILE_TMP,
            ceilings.format().as_bytes(),
        )
        .map_err(|e| io_error("write", &e))?;
    }
    let mut payload = backfill::encode(&Record {
        layout: *layout,
        node,
        ceiling,
    });
    // The wait for the synchronous standbys happens even in a session re-keying with
    // synchronous_commit off (`with_synchronous_commit_on`).
    with_synchronous_commit_on(|| {
        // SAFETY: the payload outlives XLogInsert, which copies it. As for the reservation
        // (`store::reserve`): SyncRepWaitForLSN returns early, with a WARNING, on a terminate
        // (interrupts are held by the lock, so it does not end the process inside).
        unsafe {
            pg_sys::XLogBeginInsert();
            xlog_register_data(&mut payload);
            let end = pg_sys::XLogInsert(RMGR_ID, XLOG_BACKFILL);
            pg_sys::XLogFlush(end);
            pg_sys::SyncRepWaitForLSN(end, false);
        }
    });
    // SAFETY: a plain read of a flag set by a signal handler.
    Ok(unsafe { pg_sys::ProcDiePending } == 0)
}

/// The redo of a backfill record (the startup process, one record after another): the file's
/// ceiling of the record's node id raised. A record of another layout stops the replay.
pub fn replay(record: &Record) -> Result<(), SnowflakeError> {
    let mut ceilings = load(&record.layout)?;
    if ceilings.raise(record.node, record.ceiling) {
        replace_file(
            BACKFILL_FILE,
            BACKFILL_FILE_TMP,
            ceilings.format().as_bytes(),
        )
        .map_err(|e| io_error("write", &e))?;
    }
    Ok(())
}
