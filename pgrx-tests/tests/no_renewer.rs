//! Without its renewer — no slot for the background worker in `max_worker_processes`, or the
//! worker stopped — the generator still makes IDs, each covered by a durable reservation: the
//! call that needs a renewal writes it itself, and the server log says so.

use snowflake_it::{describe, strictly_increasing, take_ids, wait_until, Config, Server};
use std::time::{Duration, Instant};

const LOGGED: &str = "the pg_snowflake renewer is not running: backends write the generator's \
                      reservations themselves";

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
/// round of its loop): the question then waits for the lock, and is answered once it goes on.
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
    assert!(server.renewer_pids().is_empty(), "a renewer runs");
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
        server.renewer_pids().len() == 1
    });
    let pid = server.renewer_pids()[0];
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

/// Whether the backend `pid` is still there.
fn backend_alive(server: &Server, pid: i32) -> bool {
    server.query_one(&format!(
        "SELECT count(*) > 0 FROM pg_stat_activity WHERE pid = {pid}"
    ))
}

/// A backend writing the reservation itself waits for a synchronous standby that never answers,
/// and is terminated there. It holds the renewal's claim; were it to exit without releasing it
/// (a FATAL raised inside the wait, as 0.3.0 did), no reservation could ever be written again
/// and every call would wait until a restart.
#[test]
fn terminating_a_backend_that_waits_for_the_standby_on_its_reservation_stalls_nothing() {
    let server = Server::start(
        "termsync",
        Config::node(10)
            .setting("max_worker_processes = 0")
            .setting("pg_snowflake.reservation_ms = 100"),
    );
    let _: i64 = server.query_one("SELECT snowflake_nextval()");
    server.execute("ALTER SYSTEM SET synchronous_standby_names = 'ghost'");
    server.execute("SELECT pg_reload_conf()");
    // The reservation runs out: the next call must write one and wait for 'ghost'.
    std::thread::sleep(Duration::from_secs(2));
    let mut a = server.connect();
    let pid: i32 = a.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let call = std::thread::spawn(move || a.query_one("SELECT snowflake_nextval()", &[]));
    wait_until(
        Duration::from_secs(20),
        "the call waits for the standby",
        || {
            server.query_one(&format!(
                "SELECT coalesce(bool_or(wait_event = 'SyncRep'), false) FROM pg_stat_activity \
                 WHERE pid = {pid}"
            ))
        },
    );
    assert!(server.query_one::<bool>("SELECT renewing FROM snowflake_stats()"));
    let gone: bool = server.query_one(&format!("SELECT pg_terminate_backend({pid}, 10000)"));
    assert!(
        gone,
        "the backend did not exit within 10 s of its terminate"
    );
    let answer = call.join().unwrap();
    assert!(answer.is_err(), "the terminated call returned {answer:?}");
    // Its claim is released: no renewal in progress, and IDs again once the standby question
    // is gone.
    let renewing: bool = server.query_one("SELECT renewing FROM snowflake_stats()");
    assert!(!renewing, "the terminated backend's claim is still held");
    server.execute("ALTER SYSTEM RESET synchronous_standby_names");
    server.execute("SELECT pg_reload_conf()");
    std::thread::sleep(Duration::from_secs(1));
    let mut c = server.connect();
    c.batch_execute("SET statement_timeout = '5s'").unwrap();
    let id = c.query_one("SELECT snowflake_nextval()", &[]);
    assert!(id.is_ok(), "no ID after the terminate: {:?}", id.err());
    let log = server.log();
    assert!(
        log.contains("terminating connection due to administrator command"),
        "the server log does not show the terminate"
    );
}

/// A backend writing the reservation itself on a slow disk (every fsync 2 s), with no
/// synchronous standby, is terminated during the write. 0.3.0 went straight back to write
/// again, and again, never processing the terminate (a state file and a WAL record per turn;
/// `pg_ctl stop -m fast` hung). It must end as soon as the write in progress is over.
#[test]
fn terminating_a_backend_while_it_writes_a_reservation_ends_it() {
    let server = Server::start(
        "termwrite",
        Config::node(11)
            .slow_disk()
            .setting("max_worker_processes = 0")
            .setting("pg_snowflake.reservation_ms = 100"),
    );
    let mut a = server.connect();
    let pid: i32 = a.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    a.query_one("SELECT snowflake_nextval()", &[]).unwrap();
    // The reservation runs out, so that the next call must write one, and the terminate comes
    // once the call is inside that write: each waited for, not slept for. With fixed sleeps, on
    // a busy machine, the call had ended and its connection closed before the terminate, which
    // found no backend.
    wait_until(Duration::from_secs(20), "the reservation runs out", || {
        server.query_one("SELECT reserved_until < clock_timestamp() FROM snowflake_stats()")
    });
    server.set_fsync_delay_ms(2_000);
    let call = std::thread::spawn(move || a.query_one("SELECT snowflake_nextval()", &[]));
    // Inside the write (the state file's fsyncs, then the WAL flush): the backend holds the
    // renewal for the seconds it takes.
    wait_until(
        Duration::from_secs(20),
        "the call writes the reservation",
        || server.query_one("SELECT renewing FROM snowflake_stats()"),
    );
    let asked = Instant::now();
    let gone: bool = server.query_one(&format!("SELECT pg_terminate_backend({pid}, 20000)"));
    let took = asked.elapsed();
    server.set_fsync_delay_ms(0);
    assert!(
        gone,
        "the backend did not exit within 20 s of its terminate"
    );
    assert!(call.join().unwrap().is_err());
    println!("terminated during a 2 s-per-fsync write: gone after {took:?}");
    // Its claim is released and the server goes on making IDs.
    assert!(!server.query_one::<bool>("SELECT renewing FROM snowflake_stats()"));
    let ids = take_ids(&mut server.connect(), 1_000, 100);
    assert!(strictly_increasing(&ids));
    assert!(!backend_alive(&server, pid));
}
