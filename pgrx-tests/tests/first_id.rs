//! The first ID after a restart, with a registry, under the settings that ship (a 30 s lease,
//! a 5 s clock margin): how long the first call waits, and how far ahead of the clock the first
//! ID is stamped, after a renewer restart, a clean restart and a crash restart (kill -9), in
//! each mode. Printed as a table (docs/FLEETS.md, *The first ID after a restart*, shows one
//! run's figures); asserted only that the first ID comes within two leases and lies above every
//! ID made before, never how fast.

use snowflake_it::registry::{claimed_node, member_config, registry_server};
use snowflake_it::{describe, Server};
use std::thread;
use std::time::{Duration, Instant};

/// The lease and clock margin that ship (`pg_snowflake.registry_lease_ms`,
/// `max_clock_skew_ms`).
const SHIPPED: [&str; 2] = [
    "pg_snowflake.registry_lease_ms = 30000",
    "pg_snowflake.max_clock_skew_ms = 5000",
];

/// IDs made one at a time for `ms` milliseconds: the last one.
fn make_ids(server: &Server, ms: u64) -> i64 {
    let mut client = server.connect();
    let started = Instant::now();
    let mut last = 0;
    while started.elapsed() < Duration::from_millis(ms) {
        last = client
            .query_one("SELECT snowflake_nextval()", &[])
            .expect("an ID")
            .get(0);
    }
    last
}

/// The first ID a call makes from now on (calls every 10 ms, on new connections: the server may
/// be starting), how long it took, and how far ahead of the server's clock it is stamped (ms).
fn first_id(server: &Server, restarted: Instant) -> (i64, Duration, f64) {
    loop {
        let made = postgres::Client::connect(&server.conninfo("postgres"), postgres::NoTls)
            .and_then(|mut client| {
                client.query_one(
                    "SELECT id, (extract(epoch FROM snowflake_timestamp(id) - clock_timestamp()) \
                 * 1000)::float8 FROM (SELECT snowflake_nextval() AS id) AS call",
                    &[],
                )
            });
        match made {
            Ok(row) => return (row.get(0), restarted.elapsed(), row.get(1)),
            Err(e) => assert!(
                restarted.elapsed() < Duration::from_secs(60),
                "no ID within two leases of the restart: {}; the server's log:\n{}",
                describe(&e),
                server.log()
            ),
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// A member in `mode` under the shipped lease: a renewer restart (SIGTERM to the renewer), a
/// clean restart (stop, start) and a crash restart (kill -9 of every process, start), each
/// after a second of IDs; one table row each.
fn restarts(mode: &str) {
    let registry = registry_server(&format!("first{mode}registry"));
    let conninfo = registry.conninfo("postgres");
    let mut config = member_config(&conninfo, Some(5))
        .setting(&format!("pg_snowflake.registry_mode = '{mode}'"));
    for setting in SHIPPED {
        config = config.setting(setting);
    }
    let member = Server::start(&format!("first{mode}"), config);
    member.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&member), 5);
    let mut rows = vec![];
    for restart in ["renewer restart", "clean restart", "crash restart"] {
        let last = make_ids(&member, 1_000);
        let restarted = match restart {
            "renewer restart" => {
                let old = *member.renewer_pids().first().expect("a renewer runs");
                let at = Instant::now();
                member.as_postgres(&format!("kill -TERM {old}"));
                at
            }
            "clean restart" => {
                let at = Instant::now();
                member.stop();
                member.start_again();
                at
            }
            _ => {
                let at = Instant::now();
                member.crash();
                member.start_again();
                at
            }
        };
        let (id, waited, lead) = first_id(&member, restarted);
        assert!(
            id > last,
            "{mode}, {restart}: the first ID {id} is not above the last before, {last}"
        );
        rows.push(format!(
            "| {mode} | {restart} | {:.2} s | {lead:.0} ms |",
            waited.as_secs_f64()
        ));
    }
    println!(
        "| mode | restart | the first ID after | stamped ahead of the clock |\n|---|---|---|---|\n{}",
        rows.join("\n")
    );
}

#[test]
fn the_first_id_after_each_kind_of_restart_in_fenced_mode() {
    restarts("fenced");
}

#[test]
fn the_first_id_after_each_kind_of_restart_in_available_mode() {
    restarts("available");
}
