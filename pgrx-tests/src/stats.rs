//! What `snowflake_stats()` shows a test, and with a registry `snowflake_registry()`'s node ids
//! per state: what the monitoring tests compare the exporter's metrics and the dashboard's
//! panels with.

use crate::checks::describe;
use crate::server::Server;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// One row of `snowflake_stats()`, and with a registry its node ids per state.
#[derive(Clone, Debug)]
pub struct Stats {
    pub node_id: Option<i32>,
    pub ids_issued: i64,
    pub last_issued: Option<SystemTime>,
    pub lead_ms: i64,
    pub borrowed_ms: i64,
    pub clock_regressions: i64,
    pub exhausted_ms: i64,
    pub overload_waits: i64,
    pub reservations: i64,
    pub reserved_until: Option<SystemTime>,
    pub time_field_ends: SystemTime,
    pub reservation_waits: i64,
    pub renewal_failures: i64,
    pub renewing: bool,
    pub clock_jumps: i64,
    pub refusing: Option<String>,
    pub registry_generation: Option<i64>,
    pub lease_remaining_ms: Option<i64>,
    pub registry_clock_offset_ms: Option<i64>,
    pub ids_past_mark: i64,
    /// `snowflake_registry()`'s node ids per state; None without a registry.
    pub registry_nodes: Option<BTreeMap<String, i64>>,
}

/// `server`'s `snowflake_stats()`, and with `registry` its registry's node ids per state.
pub fn stats(server: &Server, registry: bool) -> Stats {
    let mut client = server.connect();
    let row = client
        .query_one(
            "SELECT node_id, ids_issued, last_issued, lead_ms, borrowed_ms, clock_regressions, \
             exhausted_ms, overload_waits, reservations, reserved_until, time_field_ends, \
             reservation_waits, renewal_failures, renewing, clock_jumps, refusing, \
             registry_generation, lease_remaining_ms, registry_clock_offset_ms, ids_past_mark \
             FROM snowflake_stats()",
            &[],
        )
        .unwrap_or_else(|e| panic!("snowflake_stats(): {}", describe(&e)));
    let registry_nodes = registry.then(|| {
        // A registry that cannot be reached lists nothing: the exporter's query fails too.
        match client.query(
            "SELECT state, count(*) FROM snowflake_registry() GROUP BY state",
            &[],
        ) {
            Ok(rows) => rows
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                .collect(),
            Err(_) => BTreeMap::new(),
        }
    });
    Stats {
        node_id: row.get(0),
        ids_issued: row.get(1),
        last_issued: row.get(2),
        lead_ms: row.get(3),
        borrowed_ms: row.get(4),
        clock_regressions: row.get(5),
        exhausted_ms: row.get(6),
        overload_waits: row.get(7),
        reservations: row.get(8),
        reserved_until: row.get(9),
        time_field_ends: row.get(10),
        reservation_waits: row.get(11),
        renewal_failures: row.get(12),
        renewing: row.get(13),
        clock_jumps: row.get(14),
        refusing: row.get(15),
        registry_generation: row.get(16),
        lease_remaining_ms: row.get(17),
        registry_clock_offset_ms: row.get(18),
        ids_past_mark: row.get(19),
        registry_nodes,
    }
}

/// The node bits of the layout in force, read from `snowflake_stats().layout` ("… | 10 bits
/// node | …"): what the server shows, not the setting the exporter's queries read.
pub fn layout_node_bits(server: &Server) -> u32 {
    let layout: String = server.query_one("SELECT layout FROM snowflake_stats()");
    layout
        .split(" | ")
        .find_map(|field| field.strip_suffix(" bits node"))
        .and_then(|bits| bits.parse().ok())
        .unwrap_or_else(|| panic!("no node bits in the layout {layout:?}"))
}
