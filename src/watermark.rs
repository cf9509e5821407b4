//! The watermark: an ID below which every ID this server has issued belongs to a transaction
//! that has ended (committed and visible to every snapshot taken after, or aborted). The slots
//! and the prepared transactions' table live in shared memory (`shmem.rs`), the arithmetic in the
//! core (`snowflake_core::watermark`); here, what ties them to Postgres' transactions:
//!
//! - [`join`]: a backend's first draw claims its slot, emptied again when the process exits;
//! - [`at_xact_event`] (registered once, in the postmaster, so every backend has it): empties
//!   the slot when the top-level transaction commits, aborts or is prepared, and records a
//!   transaction being prepared in the prepared table;
//! - [`watermark`]: the call.
//!
//! Why emptying the slot at `XACT_EVENT_COMMIT` is late enough: `CommitTransaction` (xact.c)
//! calls `RecordTransactionCommit` (the commit in the WAL and pg_xact), then
//! `ProcArrayEndTransaction` (the xid leaves the proc array: every snapshot taken from then on
//! sees the transaction committed), and only then `CallXactCallbacks(XACT_EVENT_COMMIT)`. Read
//! in xact.c of PostgreSQL's development branch (19) and of the earlier forms (with
//! `MyProc->lxid` as in 15 and 16, `MyProc->vxid.lxid` as from 17, `AtEOXact_Aio` as from 18):
//! the order is the same in each. `AbortTransaction` likewise calls `ProcArrayEndTransaction` before
//! `CallXactCallbacks(XACT_EVENT_ABORT)`. A backend that dies with FATAL aborts its transaction
//! on the way out (the abort path above runs); a backend killed with SIGKILL makes the postmaster
//! reinitialise shared memory, every slot with it.
//!
//! Prepared transactions: `PrepareTransaction` assigns the xid first (`GetCurrentTransactionId`),
//! then calls `XACT_EVENT_PRE_PREPARE`, where the transaction is recorded (its xid and lowest
//! ID, or `NO_IDS`) while its slot still holds; at `XACT_EVENT_PREPARE` the slot is emptied. An
//! entry counts while `TransactionIdIsInProgress(xid)`: a prepared transaction has a dummy entry
//! in the proc array, added before the backend's own leaves it (`MarkAsPrepared`, so the xid is
//! never out of both), and removed by COMMIT/ROLLBACK PREPARED after its commit is recorded.
//! After a restart the prepared transactions come back but the table does not: the first call
//! lists them, and those the table does not know hold the watermark at `UNKNOWN` (0) until they
//! end, since any ID below the restart may be theirs.

use crate::allocate;
use crate::error::SnowflakeError;
use crate::pg;
use crate::shmem::{self, Slot};
use pgrx::prelude::*;
use snowflake_core::watermark::{self as core, NO_IDS};

/// Registers the transaction callback, once, in the postmaster while it loads the library:
/// every backend inherits it.
pub fn register() {
    // SAFETY: called from _PG_init; the callback is a function of this library.
    unsafe { pg_sys::RegisterXactCallback(Some(at_xact_event), std::ptr::null_mut()) };
}

/// Claims this backend's slot (on its first draw, once recovery is over) and empties it when the
/// process exits (after `ShutdownPostgres` has aborted any transaction, before `ProcKill`
/// frees the proc number for another backend).
pub fn join() -> Result<Slot, SnowflakeError> {
    let shm = shmem::get()?;
    let number = pg::my_proc_number();
    // SAFETY: a callback of this library, registered once per backend.
    unsafe { pg_sys::on_shmem_exit(Some(at_exit), pg_sys::Datum::from(0)) };
    usize::try_from(number)
        .ok()
        .and_then(|number| shm.claim_slot(number))
        .ok_or_else(|| SnowflakeError::Internal {
            context: "snowflake watermark",
            cause: format!("proc number {number} has no slot"),
        })
}

#[pg_guard]
unsafe extern "C-unwind" fn at_exit(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    if let Some(slot) = shmem::my_slot() {
        slot.clear();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn at_xact_event(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_PRE_PREPARE => {
            let lowest = shmem::my_slot().map_or(NO_IDS, Slot::lowest);
            let lowest = if lowest == core::NONE { NO_IDS } else { lowest };
            // SAFETY: a plain read of this transaction's xid.
            let xid = unsafe { pg_sys::GetTopTransactionIdIfAny() };
            if let Err(error) = record_prepared(xid.into_inner(), lowest) {
                error.report();
            }
        }
        XACT_EVENT_COMMIT
        | XACT_EVENT_ABORT
        | XACT_EVENT_PREPARE
        | XACT_EVENT_PARALLEL_COMMIT
        | XACT_EVENT_PARALLEL_ABORT => {
            if let Some(slot) = shmem::my_slot() {
                slot.clear();
            }
        }
        _ => {}
    }
}

/// Records a transaction being prepared in the prepared table.
fn record_prepared(xid: u32, lowest: i64) -> Result<(), SnowflakeError> {
    if xid == 0 {
        // No xid: it wrote nothing, so no row holds its IDs.
        return Ok(());
    }
    let shm = shmem::get()?;
    if shm.prepared(|table, _| core::record(table, xid, lowest, in_progress)) {
        Ok(())
    } else {
        Err(SnowflakeError::Internal {
            context: "snowflake watermark",
            cause: "the table of prepared transactions is full".into(),
        })
    }
}

fn in_progress(xid: u32) -> bool {
    // SAFETY: asks the proc array (under its own lock) about a valid xid.
    unsafe { pg_sys::TransactionIdIsInProgress(pg_sys::TransactionId::from_inner(xid)) }
}

/// `snowflake_watermark()`: draws an ID under the generator's lock (never used: it puts every
/// later ID above the value), then takes the least of it, of every open slot and of every pending
/// prepared transaction's lowest ID.
pub fn watermark() -> Result<i64, SnowflakeError> {
    let shm = shmem::get()?;
    // SAFETY: a plain read of the server's recovery state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        return Err(SnowflakeError::WatermarkInRecovery);
    }
    let drawn = allocate::draw_unrecorded(shm)?;
    let open = core::least_open(drawn, shm.open_slots());
    let listed = shm.prepared(|_, listed| *listed);
    let pending = if listed { Vec::new() } else { prepared_now()? };
    let prepared = shm.prepared(|table, listed| {
        if !*listed {
            if !core::mark_unknown(table, pending) {
                return Err(SnowflakeError::Internal {
                    context: "snowflake watermark",
                    cause: "the table of prepared transactions is full".into(),
                });
            }
            *listed = true;
        }
        Ok(core::least_prepared(table, in_progress))
    })?;
    Ok(open.min(prepared))
}

/// The xids of the prepared transactions pending now (those the view pg_prepared_xacts shows), on
/// the first call after a start.
fn prepared_now() -> Result<Vec<u32>, SnowflakeError> {
    let listed = Spi::get_one::<String>(
        "SELECT coalesce(string_agg(transaction::text, ','), '') FROM pg_catalog.pg_prepared_xact()",
    )
    .map_err(|e| SnowflakeError::Internal {
        context: "snowflake watermark: listing the prepared transactions",
        cause: e.to_string(),
    })?
    .unwrap_or_default();
    Ok(listed
        .split(',')
        .filter_map(|xid| xid.parse::<u32>().ok())
        .collect())
}
