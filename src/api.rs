//! The generator's SQL functions: thin wrappers over the shared generator (`shmem`), the
//! GUCs (`gucs`) and the core. The decoders are in `decode.rs`, the time bounds in `bounds.rs`.

use crate::error::OrReport;
use crate::timestamps::timestamptz;
use crate::{gucs, ids, shmem};
use pgrx::prelude::*;
use snowflake_core::clock::wall_now;
use snowflake_core::generator::{self, Run};

/// A new ID from this server's generator.
///
/// VOLATILE: every call returns a different value and advances shared state, so the planner
/// must call it once per row. PARALLEL RESTRICTED: it may wait for the durable reservation (and
/// in single-user mode write its WAL record), which is the leader's business, not a parallel
/// worker's.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_nextval() -> i64 {
    ids::next_id().or_report()
}

/// `n` new IDs, strictly increasing, taken from the generator in as few lock acquisitions as
/// the clock allows: one for up to about four million IDs with the default settings, more only
/// when the batch has to wait for the clock. In the select list the IDs are made as rows are
/// read (a LIMIT leaves the rest unmade); in FROM, Postgres collects all rows first. Volatile and
/// parallel restricted like `snowflake_nextval()`.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_nextval_batch(n: i32) -> SetOfIterator<'static, i64> {
    shmem::ensure_available().or_report();
    let mut remaining = generator::batch_size(n).or_report();
    let node = ids::node().or_report();
    let layout = *gucs::layout();
    let mut ids = Run::EMPTY.ids(layout, node);
    SetOfIterator::new(std::iter::from_fn(move || loop {
        if let Some(id) = ids.next() {
            return Some(id);
        }
        if remaining == 0 {
            return None;
        }
        let run = ids::next_run(node, remaining).or_report();
        remaining -= run.count;
        ids = run.ids(layout, node);
    }))
}

/// The generator's state and counters since the server started: one row.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe)]
fn snowflake_stats() -> TableIterator<
    'static,
    (
        name!(node_id, Option<i32>),
        name!(layout, String),
        name!(ids_issued, i64),
        name!(last_issued, Option<TimestampWithTimeZone>),
        name!(lead_ms, i64),
        name!(borrowed_ms, i64),
        name!(clock_regressions, i64),
        name!(exhausted_ms, i64),
        name!(overload_waits, i64),
        name!(reservations, i64),
        name!(reserved_until, Option<TimestampWithTimeZone>),
        name!(time_field_ends, TimestampWithTimeZone),
        name!(reservation_waits, i64),
        name!(renewal_failures, i64),
        name!(renewing, bool),
        name!(clock_jumps, i64),
    ),
> {
    let generator = shmem::snapshot().or_report().generator;
    let now = wall_now();
    let stats = generator.stats();
    let layout = gucs::layout();
    let reserved = generator.reserved_until();
    TableIterator::once((
        gucs::node_id().ok().map(|node| node as i32),
        layout.describe(),
        stats.issued as i64,
        generator.last_issued(layout).map(timestamptz),
        generator.lead_ms(layout, now),
        generator.borrowed_ms(layout),
        stats.clock_regressions as i64,
        stats.exhausted_ms as i64,
        stats.overload_waits as i64,
        stats.reservations as i64,
        (reserved > i64::MIN).then(|| timestamptz(reserved)),
        timestamptz(layout.end_unix_ms()),
        stats.reservation_waits as i64,
        stats.renewal_failures as i64,
        generator.renewing(),
        stats.clock_jumps as i64,
    ))
}

extension_sql!(
    r#"
COMMENT ON FUNCTION snowflake_nextval() IS
'Returns a new snowflake ID from this server''s generator: time-ordered, unique across every server with its own pg_snowflake.node_id.';
COMMENT ON FUNCTION snowflake_nextval_batch(integer) IS
'Returns n (1 to 100000000) new snowflake IDs, strictly increasing, taken from this server''s generator in as few lock acquisitions as the clock allows.';
COMMENT ON FUNCTION snowflake_stats() IS
'Shows this server''s generator: node, layout, IDs issued since start, last issued time, lead over the clock, clock regressions, exhausted milliseconds, overload waits, durable reservation, when the time field runs out, waits for and failures of reservation writes, whether one is being written, and forward steps of the system clock held rather than followed.';
"#,
    name = "generator_comments",
    requires = [snowflake_nextval, snowflake_nextval_batch, snowflake_stats],
);
