//! Without its renewer — no slot for the background worker in `max_worker_processes`, or the
//! worker stopped — the generator still makes IDs, each covered by a durable reservation: the
//! call that needs a renewal writes it itself, and the server log says so.

use snowflake_it::{describe, strictly_increasing, take_ids, wait_until, Config, Server};
use std::time::{Duration, Instant};

const LOGGED: &str = "the pg_snowflake renewer is not running: backends write the generator's \
                      reservations themselves";

/// The server's renewer processes (a worker with no database connection is not in
/// pg_stat_activity): the postmaster's children titled "pg_snowflake renewer". The data
/// directory is the postgres user's, which the test's user may not be: read it as postgres.
fn renewer_pids(server: &Server) -> Vec<u32> {
    let pidfile =
        server.output_as_postgres(&format!("head -n 1 {}", server.data_file("postmaster.pid")));
    let postmaster = pidfile.trim();
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

/// Sends `kill -NAME` to the server's process `pid`, as the postgres user (whose process it is).
fn signal(server: &Server, pid: u32, name: &str) {
    server.as_postgres(&format!("kill -{name} {pid}"));
}

/// Stops the renewer `pid` (SIGSTOP) between two renewals. One stopped in the middle of a write
/// holds its claim, and calls rightly wait for it as for a stalled disk (the renewer keeps the
/// reservation ahead of the clock, so it writes every half reservation whether or not calls
/// come): that is not the case this test is about. A stopped renewer cannot claim, and no
/// backend claims while the renewer counts as running (3 s), so `renewing` read after the stop
/// is settled; when it is true, the renewer goes on and is stopped again a moment later. So it is
/// when the renewer was stopped holding the generator's lock (for a few instructions of each
/// turn of its loop): the question then waits for the lock, and is answered once it goes on.
fn stop_between_renewals(server: &Server, pid: u32) {
    for _ in 0..50 {
        let mut client = server.connect();
        signal(server, pid, "STOP");
        let between = std::thread::scope(|scope| {
            let question = scope.spawn(move || {
                let row = client.query_one("SELECT renewing FROM snowflake_stats()", &[]);
                !row.unwrap().get::<_, bool>(0)
            });
            let asked = Instant::now();
            while !question.is_finished() && asked.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(5));
            }
            if !question.is_finished() {
                signal(server, pid, "CONT");
                question.join().unwrap();
                return false;
            }
            question.join().unwrap()
        });
        if between {
            return;
        }
        signal(server, pid, "CONT");
        std::thread::sleep(Duration::from_millis(30));
    }
    panic!("the renewer was writing a reservation (or held the lock) at each of 50 stops");
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
    stop_between_renewals(&server, pid);
    let before = reservations(&server);
    // The renewer falls silent; after 3 s the calls stop waiting for it and renew themselves.
    let during = ids_for(&server, 6, "10s");
    let renewed = reservations(&server) - before;
    signal(&server, pid, "CONT");
    println!(
        "renewer stopped for 6 s: {} IDs, {renewed} reservations written by the backend",
        during.len()
    );
    // 200 ms reservations renewed at half: about fifteen renewals in the last 3 s (fewer on a
    // slow disk, where reservations grow with the time a write takes).
    assert!(
        renewed >= 3,
        "{renewed} reservations while the renewer was stopped"
    );
    assert!(server.log().contains(LOGGED));
    ids.extend(during);
    ids.extend(take_ids(&mut server.connect(), 1_000, 1_000));
    assert!(strictly_increasing(&ids));
}
