//! `snowflake_stats()`: the generator's state and counters, copied out of shared memory.

use super::timestamps::timestamptz;
use crate::error::OrReport;
use crate::gucs;
use crate::shmem;
use pgrx::prelude::*;
use snowflake_core::clock::{wall_now, Clock, SystemClock};
use snowflake_core::node::Refusing;

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
        name!(refusing, Option<String>),
        name!(registry_generation, Option<i64>),
        name!(lease_remaining_ms, Option<i64>),
        name!(registry_clock_offset_ms, Option<i64>),
        name!(ids_past_mark, i64),
    ),
> {
    let issuer = shmem::get().or_report().snapshot();
    let (generator, node, status) = (issuer.generator(), issuer.node(), issuer.registry());
    let registry = gucs::registry().is_some();
    let node_known =
        issuer.issuing() || gucs::configured_node().is_some() || node.identity.is_some();
    let now = wall_now();
    let stats = generator.stats();
    let layout = gucs::layout();
    let reserved = generator.reserved_until();
    TableIterator::once((
        node_known.then_some(node.id as i32),
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
        refusing_text(node.refusing),
        node.identity.map(|identity| identity.generation),
        (registry && status.lease_ends_at > i64::MIN)
            .then(|| (status.lease_ends_at - SystemClock.monotonic()).max(0)),
        (registry && status.last_contact > i64::MIN).then_some(status.clock_offset_ms),
        issuer.ids_past_mark() as i64,
    ))
}

/// Why no ID may be made now, in a word or two (`None`: they may).
fn refusing_text(refusing: Refusing) -> Option<String> {
    let text = match refusing {
        Refusing::Nothing => return None,
        Refusing::NodeUnset => "node id unset",
        Refusing::AwaitingOldStateFile => "awaiting the old state file",
        Refusing::AwaitingClaim => "awaiting the registry claim",
        Refusing::ClaimRefused => "claim refused",
        Refusing::ClaimLost => "claim lost",
        Refusing::LeaseExpired => "lease expired",
        Refusing::AwaitingLease => "awaiting a fenced lease",
        Refusing::ClockSkew => "clock skew",
    };
    Some(text.into())
}

extension_sql_file!(
    "../../sql/install/stats_comment.sql",
    name = "stats_comment",
    requires = [snowflake_stats],
);
