//! Without its renewer — no slot for the background worker in `max_worker_processes`, or the
//! worker stopped — the generator still makes IDs, each covered by a durable reservation: the
//! call that needs a renewal writes it itself, and the server log says so.

use snowflake_it::{describe, strictly_increasing, take_ids, wait_until, Config, Server};
use std::time::{Duration, Instant};

const LOGGED: &str = "the pg_snowflake renewer is not running: backends write the generator's \
                      reservations themselves";

/// The server's renewer processes (a worker with no database connection is not in
/// pg_stat_activity): the postmaster's children titled "pg_snowflake renewer".
fn renewer_pids(server: &Server) -> Vec<u32> {
    let pidfile = std::fs::read_to_string(server.data_file("postmaster.pid")).unwrap();
    let postmaster = pidfile.lines().next().unwrap();
    let out = std::process::Command::new("pgrep")
        .args(["-P", postmaster, "-f", "pg_snowflake renewer"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|pid| pid.parse().unwrap())
        .collect()
}

fn reservations(server: &Server) -> i64 {
    server.query_one("SELECT reservations FROM snowflake_stats()")
}

/// IDs for `seconds`, a call every millisecond or so, each call allowed `timeout`.
fn ids_for(server: &Server, seconds: u64, timeout: &str) -> Vec<i64> {
    let mut client = server.connect();
    client
        .batch_execute(&format!("SET statement_timeout = '{timeout}'"))
        .unwrap();
    let statement = client.prepare("SELECT snowflake_nextval()").unwrap();
    let started = Instant::now();
    let mut ids = vec![];
    while started.elapsed() < Duration::from_secs(seconds) {
        match client.query_one(&statement, &[]) {
            Ok(row) => ids.push(row.get(0)),
            Err(e) => panic!("after {} IDs: {}", ids.len(), describe(&e)),
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    ids
}

#[test]
fn with_no_slot_for_the_renewer_backends_write_the_reservations() {
    let server = Server::start(
        "noslot",
        Config::node(6)
            .fake_clock("+0")
            .setting("max_worker_processes = 0")
            .setting("pg_snowflake.reservation_ms = 100"),
    );
    assert!(renewer_pids(&server).is_empty(), "a renewer runs");
    let before = reservations(&server);
    // 100 ms reservations renewed at half: about twenty renewals in 2 s, each by a backend.
    let mut ids = ids_for(&server, 2, "5s");
    let renewed = reservations(&server) - before;
    assert!(renewed >= 10, "{renewed} reservations in 2 s");
    assert!(
        server.log().contains(&format!("LOG:  {LOGGED}")),
        "the server log does not say the renewer is not running"
    );
    // The reservations the backends wrote hold across a crash with the clock set back.
    server.crash();
    server.set_clock("-10m");
    server.start_again();
    let after = take_ids(&mut server.connect(), 10_000, 1_000);
    println!(
        "no renewer: {} IDs in 2 s with {renewed} reservations written by the backend; after \
         kill -9 and a restart 10 min behind, {} more",
        ids.len(),
        after.len()
    );
    ids.extend(after);
    assert!(strictly_increasing(&ids));
}

#[test]
fn a_stopped_renewer_is_stood_in_for_by_the_backends_until_it_is_back() {
    let server = Server::start(
        "stopped",
        Config::node(7).setting("pg_snowflake.reservation_ms = 200"),
    );
    wait_until(Duration::from_secs(30), "the renewer runs", || {
        renewer_pids(&server).len() == 1
    });
    let pid = renewer_pids(&server)[0];
    let mut ids = take_ids(&mut server.connect(), 1_000, 1_000);
    // Stop it between renewals (a renewer stopped in the middle of a write would hold its
    // claim, and calls would rightly wait for it): no call has raised a demand for 2 s, and the
    // last renewal took milliseconds.
    std::thread::sleep(Duration::from_secs(2));
    let signal = |name: &str| {
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name} {pid}");
    };
    signal("STOP");
    let before = reservations(&server);
    // The renewer falls silent; after 3 s the calls stop waiting for it and renew themselves.
    let during = ids_for(&server, 6, "10s");
    let renewed = reservations(&server) - before;
    signal("CONT");
    println!(
        "renewer stopped for 6 s: {} IDs, {renewed} reservations written by the backend",
        during.len()
    );
    assert!(
        renewed >= 5,
        "{renewed} reservations while the renewer was stopped"
    );
    assert!(server.log().contains(LOGGED));
    ids.extend(during);
    ids.extend(take_ids(&mut server.connect(), 1_000, 1_000));
    assert!(strictly_increasing(&ids));
}
