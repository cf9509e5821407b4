//! Making IDs: thin wrappers over the hot path (`allocate.rs`).

use crate::allocate;
use crate::error::OrReport;
use crate::{gucs, shmem};
use pgrx::prelude::*;
use snowflake_core::generator::{self, Run};

// `snowflake_nextval()` is a plain version-1 C function, declared below by hand, not by
// `#[pg_extern]`: its common case runs without pgrx's per-call guard, which costs more than the
// ID itself (81 of 484 instructions per ID when it had one, and 58 more of the general
// path's bookkeeping). The SQL declaration and its C symbol are those `#[pg_extern]` made before (0.1.0
// to 0.5.0), so no upgrade script is needed and every installed version calls this.
//
// Safety argument. `snowflake_nextval_wrapper` is called by the executor (fmgr) like any C
// function. It calls `allocate::next_id_fast`, which reads a process-local pointer (the
// backend's watermark slot), the shared memory pointer and the settings (plain loads), takes the
// generator's LWLock, reads the clock (`clock_gettime`, which cannot fail), runs the core's
// `Generator::next_one` (arithmetic that never panics: its doc says why), records the
// transaction's first ID in the slot (an atomic load and store), and releases the lock. So:
// - no ERROR can be raised in it but by `LWLockAcquire`/`LWLockRelease` themselves (only for a
//   backend holding 200 LWLocks, or releasing one it does not hold: neither can happen here);
//   were one raised, its longjmp would cross only frames with nothing to drop (no allocation, no
//   value with a destructor is alive in them), and Postgres' error recovery releases the LWLock
//   (`LWLockReleaseAll`), as for C code;
// - it allocates nothing and holds no reference past its return;
// - it is `extern "C"`: a panic, which the argument above rules out, would abort the process
//   (a crash, which Postgres recovers from like any other) instead of unwinding into C frames;
// - everything else (this backend's first call, which asks whether the server is in recovery;
//   a wait; a renewal to start; a warning; an error; an ID the core leaves to `allocate`) goes to
//   `snowflake_nextval_guarded`, the path all IDs took before, under pgrx's guard, from the
//   start: the fast path changed nothing when it returns `None`.
// `generator/tests/model.rs` in the core checks `next_one` against `allocate` on every state its
// model reaches; `bench/instructions` counts what this saves.

/// A new ID from this server's generator: `snowflake_nextval()`'s C symbol (see above).
///
/// VOLATILE: every call returns a different value and advances shared state, so the planner
/// must call it once per row. PARALLEL RESTRICTED: it may wait for the durable reservation (and
/// in single-user mode write its WAL record), which is the leader's business, not a parallel
/// worker's.
///
/// # Safety
/// Called by Postgres' function manager with a valid `fcinfo`, as for any version-1 function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snowflake_nextval_wrapper(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    match allocate::next_id_fast() {
        Some(id) => pg_sys::Datum::from(id),
        None => snowflake_nextval_otherwise(fcinfo),
    }
}

/// The fast path's way out, kept out of line so that the fast path's frame stays small.
#[cold]
#[inline(never)]
fn snowflake_nextval_otherwise(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the same call, with the same arguments, the function manager made.
    unsafe { snowflake_nextval_guarded(fcinfo) }
}

/// Declares `snowflake_nextval_wrapper` a version-1 function (what `PG_FUNCTION_INFO_V1` does in
/// C).
#[unsafe(no_mangle)]
pub extern "C" fn pg_finfo_snowflake_nextval_wrapper() -> &'static pg_sys::Pg_finfo_record {
    static V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// Every call the fast path leaves: the general path, under pgrx's guard (which turns a Rust
/// error or panic into a Postgres ERROR).
#[pg_guard]
unsafe extern "C-unwind" fn snowflake_nextval_guarded(
    _fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    pg_sys::Datum::from(allocate::next_id().or_report())
}

extension_sql!(
    r#"
CREATE FUNCTION "snowflake_nextval"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_nextval_wrapper';
"#,
    name = "snowflake_nextval",
    creates = [Function(snowflake_nextval)],
);

/// `n` new IDs, strictly increasing, taken from the generator in as few lock acquisitions as
/// the clock allows: one for up to about four million IDs with the default settings, more only
/// when the batch has to wait for the clock. In the select list the IDs are made as rows are
/// read (a LIMIT leaves the rest unmade); in FROM, Postgres collects all rows first. Volatile and
/// parallel restricted like `snowflake_nextval()`.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_nextval_batch(n: i32) -> SetOfIterator<'static, i64> {
    let shm = shmem::get().or_report();
    let mut remaining = generator::batch_size(n).or_report();
    let layout = *gucs::layout();
    let mut ids = Run::EMPTY.ids(layout, 0);
    SetOfIterator::new(std::iter::from_fn(move || loop {
        if let Some(id) = ids.next() {
            return Some(id);
        }
        if remaining == 0 {
            return None;
        }
        let (run, node) = allocate::next_run(shm, &layout, remaining).or_report();
        remaining -= run.count;
        ids = run.ids(layout, node);
    }))
}

extension_sql_file!(
    "../../sql/install/generator_comments.sql",
    name = "generator_comments",
    requires = ["snowflake_nextval", snowflake_nextval_batch],
);
