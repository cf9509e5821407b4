//! The node-id registry's SQL face (`src/registry/`): making its table, listing and retiring
//! node ids. Each call opens its own connection to the registry with the server's
//! `pg_snowflake.registry`; EXECUTE is revoked from PUBLIC (the connection string may carry a
//! password, and retiring an id is an operator's act).

use super::timestamps::timestamptz_checked;
use crate::error::{OrReport, RegistryError, SnowflakeError};
use crate::gucs;
use crate::registry::client::{self, Sql};
use crate::registry::libpq::{Conn, Failure};
use crate::shmem;
use pgrx::prelude::*;
use snowflake_core::registry::table::{self, Retirement};

/// A connection to the registry, or the error that says why not.
fn connect() -> Result<Conn, SnowflakeError> {
    let conninfo = gucs::registry().ok_or(RegistryError::NotConfigured)?;
    Conn::connect(&conninfo, client::TIMEOUT_MS)
        .map_err(|e| failed("connect to the pg_snowflake registry", e))
}

fn failed(action: &'static str, failure: Failure) -> SnowflakeError {
    RegistryError::Failed {
        action,
        cause: failure.message,
    }
    .into()
}

/// Makes the registry's table `snowflake_nodes` in the registry database, if it is not there.
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_registry_create() {
    let conn = connect().or_report();
    conn.query(client::CREATE, &[])
        .map_err(|e| {
            failed(
                "create the table snowflake_nodes in the pg_snowflake registry",
                e,
            )
        })
        .or_report();
}

/// Every node id the registry knows: its state (live: leased; lost: lease run out; retired:
/// not yet handed out again; free: retired and free again), holder, generation, lease,
/// high-water mark and clock offset; `this_server` marks the row of this server's claim.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_registry() -> TableIterator<
    'static,
    (
        name!(node_id, i32),
        name!(state, String),
        name!(holder_label, String),
        name!(system_identifier, Option<String>),
        name!(generation, i64),
        name!(claimed_at, Option<TimestampWithTimeZone>),
        name!(last_seen, Option<TimestampWithTimeZone>),
        name!(lease_until, Option<TimestampWithTimeZone>),
        name!(high_water, Option<TimestampWithTimeZone>),
        name!(clock_offset_ms, Option<i64>),
        name!(retired_at, Option<TimestampWithTimeZone>),
        name!(this_server, bool),
    ),
> {
    let conn = connect().or_report();
    let margin = gucs::registry_settings().max_clock_skew_ms;
    let rows = client::list(&conn, margin, &gucs::layout().describe())
        .map_err(|e| failed("list the node ids of the pg_snowflake registry", e))
        .or_report();
    let mine = shmem::get()
        .ok()
        .and_then(|shm| {
            let node = *shm.snapshot().node();
            node.identity.map(|identity| (node.id, identity))
        })
        .map(|(node, identity)| {
            (
                i64::from(node),
                snowflake_core::registry::Token(identity.token).to_string(),
                identity.generation,
            )
        });
    let at = |ms: Option<i64>| ms.and_then(timestamptz_checked);
    let rows: Vec<_> = rows
        .into_iter()
        .map(|r| {
            let generation = r.generation.unwrap_or(0);
            let this_server = mine.as_ref().is_some_and(|(node, token, g)| {
                r.node_id == Some(*node)
                    && r.owner_token.as_ref() == Some(token)
                    && *g == generation
            });
            (
                r.node_id.unwrap_or(-1) as i32,
                r.state.unwrap_or_default(),
                r.holder_label.unwrap_or_default(),
                r.system_identifier,
                generation,
                at(r.claimed_at),
                at(r.last_seen),
                at(r.lease_until),
                at(r.high_water),
                r.clock_offset_ms,
                at(r.retired_at),
                this_server,
            )
        })
        .collect();
    TableIterator::new(rows)
}

/// Retires node id `node_id`, whose holder is gone: it is handed out again once the registry's
/// clock is past its high-water mark (returned) by `pg_snowflake.max_clock_skew_ms`.
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_registry_retire(node_id: i32) -> Option<TimestampWithTimeZone> {
    let node = u32::try_from(node_id)
        .map_err(|_| RegistryError::NoSuchNode {
            node: i64::from(node_id),
        })
        .or_report();
    let conn = connect().or_report();
    let retired = table::retire(&mut Sql(&conn), node)
        .map_err(|e| failed("retire the node id in the pg_snowflake registry", e))
        .or_report();
    let refused = match retired {
        Retirement::Retired { high_water } => return high_water.and_then(timestamptz_checked),
        // An operator's retirement names no claim: never `ClaimedAgain`, whose holder is live.
        Retirement::Connected { label } | Retirement::ClaimedAgain { label } => {
            RegistryError::RetireLive { node, label }
        }
        Retirement::LeaseRuns { label, until } => {
            RegistryError::RetireLeaseRuns { node, label, until }
        }
        Retirement::NoLiveRow => RegistryError::NoSuchNode {
            node: i64::from(node_id),
        },
    };
    SnowflakeError::from(refused).report()
}

extension_sql_file!(
    "../../sql/install/registry_functions.sql",
    name = "registry_functions",
    requires = [
        snowflake_registry_create,
        snowflake_registry,
        snowflake_registry_retire
    ],
);
