//! A fleet with a node-id registry (`pg_snowflake.registry`), for the tests that need one: the
//! registry (a plain server), its members' configuration (reaching it directly or through a
//! [`crate::Proxy`]), and what a test asks a member: its refusal, its claim, its next ID.

use crate::checks::describe;
use crate::ports::{lease_port, PortLease};
use crate::server::{Config, Server};
use std::time::{Duration, Instant};

/// The registry's lease in these tests (ms): short, so that a lease runs out within seconds.
pub const LEASE_MS: i64 = 3_000;

/// The registry: a plain server, whose table a member makes with `snowflake_registry_create()`.
pub fn registry_server(name: &str) -> Server {
    Server::start(name, registry_config())
}

/// A registry server's configuration: a plain server of the major under test, or of the one
/// `PGSF_REGISTRY_PG_CONFIG` names. The servers stage names the oldest major tested there when it
/// runs the registry's tests once, on the newest: the registry's SQL, sent over libpq by members
/// of the newest major, then runs against the oldest major's server too.
pub fn registry_config() -> Config {
    match std::env::var_os("PGSF_REGISTRY_PG_CONFIG") {
        Some(pg_config) => Config::default().postgres(pg_config.into()),
        None => Config::default(),
    }
}

/// A member reaching the registry through `conninfo` (the registry's own, or a proxy's), with
/// node id `node` (None: the registry assigns one), a lease of [`LEASE_MS`] and a clock check
/// of 2 s.
pub fn member_config(conninfo: &str, node: Option<i32>) -> Config {
    Config {
        preload: true,
        node_id: node,
        ..Config::default()
    }
    .setting(&format!("pg_snowflake.registry = '{conninfo}'"))
    .setting(&format!("pg_snowflake.registry_lease_ms = {LEASE_MS}"))
    .setting("pg_snowflake.max_clock_skew_ms = 2000")
}

/// What a member is given to reach a registry with a standby: both servers in one libpq
/// multi-host string, the writable one chosen (`target_session_attrs=read-write`).
pub fn both(primary: &Server, standby: &Server) -> String {
    format!(
        "host=127.0.0.1,127.0.0.1 port={},{} dbname=postgres user=postgres \
         target_session_attrs=read-write",
        primary.port, standby.port
    )
}

/// The registry's standby: a streaming replica of `primary`, returned once it streams.
pub fn registry_standby(primary: &Server, name: &str) -> Server {
    let standby = Server::standby_of(primary, name, Config::default());
    crate::wait_until(Duration::from_secs(30), "the standby to stream", || {
        primary.query_one::<bool>(
            "SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'",
        )
    });
    standby
}

/// Why the server refuses IDs (`snowflake_stats().refusing`), None when it does not.
pub fn refusing(server: &Server) -> Option<String> {
    server.query_one("SELECT refusing FROM snowflake_stats()")
}

/// One `snowflake_nextval()` on a new connection: the ID or the server's error.
pub fn next_id(server: &Server) -> Result<i64, postgres::Error> {
    server
        .connect()
        .query_one("SELECT snowflake_nextval()", &[])
        .map(|row| row.get(0))
}

/// The node id the server makes IDs under once it refuses nothing, waiting up to `timeout`;
/// `Err` with what it said last (its refusal and the error of a call) when it still refuses.
pub fn claimed_within(server: &Server, timeout: Duration) -> Result<i32, String> {
    let started = Instant::now();
    loop {
        let row = server
            .connect()
            .query_one("SELECT node_id, refusing FROM snowflake_stats()", &[])
            .unwrap_or_else(|e| panic!("snowflake_stats(): {}", describe(&e)));
        let refusing: Option<String> = row.get(1);
        if refusing.is_none() {
            return Ok(row.get::<_, Option<i32>>(0).unwrap_or(-1));
        }
        if started.elapsed() > timeout {
            let call = match next_id(server) {
                Ok(id) => format!("an ID, {id}"),
                Err(e) => describe(&e),
            };
            return Err(format!(
                "still refusing after {timeout:?} ({refusing:?}); snowflake_nextval(): {call}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`claimed_within`] 30 s, for a claim the test sets up: panics with the server's log if none
/// is made.
pub fn claimed_node(server: &Server) -> i32 {
    claimed_within(server, Duration::from_secs(30))
        .unwrap_or_else(|said| panic!("no claim: {said}; the server's log:\n{}", server.log()))
}

/// The registry's table, read on the registry's server: node id, state, generation,
/// high-water mark (Unix ms), lease end and holder, one line each, and the node ids whose
/// advisory lock a session holds (for failure messages).
pub fn registry_rows(registry: &Server) -> String {
    let locked = locked_nodes(registry);
    let rows = registry
        .connect()
        .query(
            "SELECT node_id, state, generation, high_water_ms, lease_until::text, holder_label \
             FROM snowflake_nodes ORDER BY node_id",
            &[],
        )
        .unwrap_or_else(|e| panic!("snowflake_nodes: {}", describe(&e)))
        .iter()
        .map(|row| {
            format!(
                "{} {} generation {} high water {:?} lease until {} {}",
                row.get::<_, i32>(0),
                row.get::<_, String>(1),
                row.get::<_, i64>(2),
                row.get::<_, Option<i64>>(3),
                row.get::<_, String>(4),
                row.get::<_, String>(5)
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    format!("{rows}\nnode ids locked by a registry session: {locked:?}")
}

/// The node ids whose advisory lock a session of the registry holds (its holders' sign that
/// they are connected), read on the registry's server.
pub fn locked_nodes(registry: &Server) -> Vec<i64> {
    registry
        .connect()
        .query(
            "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' \
             AND classid = 1936617335::oid AND objsubid = 2 AND granted ORDER BY 1",
            &[],
        )
        .unwrap_or_else(|e| panic!("pg_locks: {}", describe(&e)))
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// A TCP port on 127.0.0.1 where nothing listens, held (no server of the tests takes it) for as
/// long as this lives: a registry that refuses connections.
pub struct VacantPort {
    pub port: u16,
    _lease: PortLease,
}

impl VacantPort {
    pub fn lease() -> VacantPort {
        let lease = lease_port();
        VacantPort {
            port: lease.number,
            _lease: lease,
        }
    }

    /// A connection string for database `postgres` on the port.
    pub fn conninfo(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }
}

/// The state of `node`'s row as a member lists it (live, lost, retired, free), None without a
/// row.
pub fn node_state(member: &Server, node: i32) -> Option<String> {
    member
        .connect()
        .query_opt(
            "SELECT state FROM snowflake_registry() WHERE node_id = $1",
            &[&node],
        )
        .unwrap_or_else(|e| panic!("snowflake_registry(): {}", describe(&e)))
        .map(|row| row.get(0))
}

/// The lines of the server's log after its first `skip` bytes (a length of [`Server::log`] taken
/// earlier) that contain `text`.
pub fn log_lines_since(server: &Server, skip: usize, text: &str) -> Vec<String> {
    let log = server.log();
    log.get(skip..)
        .unwrap_or("")
        .lines()
        .filter(|line| line.contains(text))
        .map(str::to_string)
        .collect()
}
