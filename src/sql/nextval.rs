//! Making IDs: thin wrappers over the hot path (`allocate.rs`).

use crate::allocate;
use crate::error::OrReport;
use crate::{gucs, shmem};
use pgrx::prelude::*;
use snowflake_core::generator::{self, Run};

/// A new ID from this server's generator.
///
/// VOLATILE: every call returns a different value and advances shared state, so the planner
/// must call it once per row. PARALLEL RESTRICTED: it may wait for the durable reservation (and
/// in single-user mode write its WAL record), which is the leader's business, not a parallel
/// worker's.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_nextval() -> i64 {
    allocate::next_id().or_report()
}

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

extension_sql!(
    r#"
COMMENT ON FUNCTION snowflake_nextval() IS
'Returns a new snowflake ID from this server''s generator: time-ordered, unique across every server with its own pg_snowflake.node_id.';
COMMENT ON FUNCTION snowflake_nextval_batch(integer) IS
'Returns n (1 to 100000000) new snowflake IDs, strictly increasing, taken from this server''s generator in as few lock acquisitions as the clock allows.';
"#,
    name = "generator_comments",
    requires = [snowflake_nextval, snowflake_nextval_batch],
);
