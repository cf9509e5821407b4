//! Time → ID bounds: the SQL side of `Layout::first_id_at` / `Layout::last_id_at`, so that
//! "rows made yesterday" is a range scan on the primary key and day partitions of a
//! Snowflake-keyed table can be bounded by timestamps.

use super::timestamps::unix_ms;
use crate::error::OrReport;
use crate::gucs;
use pgrx::prelude::*;

/// The smallest ID any node can issue at `ts` (node 0, sequence 0), with this server's layout.
///
/// IMMUTABLE: a timestamptz is an absolute instant and the layout is fixed for a data directory
/// (see decode.rs), so the planner may fold it into a constant and use it as an index or
/// partition-pruning bound.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_from_timestamp(ts: TimestampWithTimeZone) -> i64 {
    gucs::layout().first_id_at(unix_ms(ts)).or_report()
}

/// The largest ID any node can issue at `ts` (highest node and sequence), with this server's
/// layout.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_max_from_timestamp(ts: TimestampWithTimeZone) -> i64 {
    gucs::layout().last_id_at(unix_ms(ts)).or_report()
}

extension_sql_file!(
    "../../sql/install/bounds_comments.sql",
    name = "bounds_comments",
    requires = [snowflake_from_timestamp, snowflake_max_from_timestamp],
);
