//! Every ID handed out is covered on the synchronous standby, not only every ID stored: a
//! reservation counts only once the synchronous standby has flushed its WAL record, so IDs
//! returned by a plain SELECT (kept by the application elsewhere, never written to a table) are
//! never issued again by the standby once it is promoted, even with its clock behind. That
//! holds whether the renewer writes the reservations or, with no renewer running, the backends
//! do: a backend's write holds back its statement timeout, which would otherwise end the wait
//! for the standby early.
//!
//! The test holds the standby's WAL receiver back (SIGSTOP) while IDs are handed out, so that
//! everything written after that point is lost with the primary: only what the standby had
//! before protects the IDs.

use snowflake_it::{Config, Server};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn ids_handed_out_by_select_are_never_reissued_after_failover_to_a_synchronous_standby() {
    failover_after_handing_out_ids(
        Config::node(7).setting("pg_snowflake.reservation_ms = 4000"),
        "renewer",
        "3s",
    );
}

#[test]
fn the_same_when_backends_write_the_reservations_with_no_renewer_running() {
    // A timeout well inside the reservation: were it to end the backend's wait for the standby
    // (as it ends a commit's), the reservation would count unconfirmed and IDs up to 3.5 s of
    // it would be handed out, then issued again by the promoted standby.
    failover_after_handing_out_ids(
        Config::node(8)
            .setting("max_worker_processes = 0")
            .setting("pg_snowflake.reservation_ms = 4000"),
        "no renewer",
        "500ms",
    );
}

fn failover_after_handing_out_ids(config: Config, case: &str, statement_timeout: &str) {
    let renewer = case == "renewer";
    let primary = Server::start("syncprim", config);
    let standby = Server::standby_of(&primary, "syncstby", Config::default().fake_clock("-10m"));
    primary.make_standby_synchronous();

    let mut client = primary.connect();
    let statement = client
        .prepare("SELECT snowflake_nextval() FROM generate_series(1, 1000)")
        .unwrap();
    let handed_out = Arc::new(Mutex::new(Vec::<i64>::new()));
    for _ in 0..20 {
        let rows = client.query(&statement, &[]).unwrap();
        handed_out
            .lock()
            .unwrap()
            .extend(rows.iter().map(|r| r.get::<_, i64>(0)));
    }
    // The stop must come while the reservation has room, or the first call after it is the one
    // that must renew and no ID is handed out while the standby is held back: the test would
    // prove nothing. Hand out IDs until a reservation is written and confirmed by the standby
    // (with no renewer, by one of these calls, which waits for it), then stop the receiver at
    // once. A 4 s reservation leaves the calls at least 2 s (half of it: a backend renews once
    // less than half is left; the renewer, with the whole of it) on a loaded machine.
    let reservations = |client: &mut postgres::Client| -> i64 {
        client
            .query_one("SELECT reservations FROM snowflake_stats()", &[])
            .unwrap()
            .get(0)
    };
    let written = reservations(&mut client);
    let waiting = Instant::now();
    while reservations(&mut client) == written {
        assert!(
            waiting.elapsed() < Duration::from_secs(30),
            "no reservation was written while IDs were handed out"
        );
        let rows = client.query(&statement, &[]).unwrap();
        handed_out
            .lock()
            .unwrap()
            .extend(rows.iter().map(|r| r.get::<_, i64>(0)));
    }
    let before_stop = handed_out.lock().unwrap().len();

    // Hold the standby's WAL receiver back: from now on the standby receives nothing.
    let receiver: i32 = standby.query_one("SELECT pid FROM pg_stat_wal_receiver");
    standby.as_postgres(&format!("kill -STOP {receiver}"));
    let room_ms: f64 = client
        .query_one(
            "SELECT extract(epoch FROM reserved_until - clock_timestamp())::float8 * 1000 \
             FROM snowflake_stats()",
            &[],
        )
        .unwrap()
        .get(0);

    // Hand out IDs by SELECT until a call has to wait for a reservation the standby cannot
    // confirm. With a renewer, that call waits until its statement timeout; a backend writing
    // the reservation itself holds its timeout back and waits for the standby.
    client
        .batch_execute(&format!("SET statement_timeout = '{statement_timeout}'"))
        .unwrap();
    let calls = {
        let handed_out = Arc::clone(&handed_out);
        std::thread::spawn(move || loop {
            match client.query(&statement, &[]) {
                Ok(rows) => handed_out
                    .lock()
                    .unwrap()
                    .extend(rows.iter().map(|r| r.get::<_, i64>(0))),
                Err(e) => break snowflake_it::describe(&e),
            }
        })
    };
    let started = Instant::now();
    let (mut count, mut since) = (0, Instant::now());
    let stalled_for = loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "IDs kept coming without the standby confirming a reservation"
        );
        std::thread::sleep(Duration::from_millis(100));
        let now = handed_out.lock().unwrap().len();
        if now != count {
            (count, since) = (now, Instant::now());
        }
        // Well past the statement timeout with no ID handed out.
        if calls.is_finished() || since.elapsed() > Duration::from_secs(6) {
            break since.elapsed();
        }
    };
    let finished_before_crash = calls.is_finished();
    primary.crash();
    let stopped_by = calls.join().unwrap();
    let handed_out = handed_out.lock().unwrap().clone();
    let after_stop = handed_out.len() - before_stop;

    standby.as_postgres(&format!("kill -CONT {receiver}"));
    standby.promote();
    let server_now: f64 = standby.query_one("SELECT extract(epoch FROM now())::float8");
    let behind = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - server_now;
    let new_ids = snowflake_it::take_ids(&mut standby.connect(), 100_000, 1_000);
    let handed: HashSet<i64> = handed_out.iter().copied().collect();
    let reissued = new_ids.iter().filter(|id| handed.contains(id)).count();
    let max_handed = *handed_out.iter().max().unwrap();
    let not_above = new_ids.iter().filter(|&&id| id <= max_handed).count();
    println!(
        "{case}: synchronous standby held back: {before_stop} IDs handed out by SELECT before, \
         {after_stop} after its WAL receiver stopped (the reservation reached {room_ms:.0} ms \
         past the stop), then no ID for {:.1} s (the call: \
         {stopped_by}); primary SIGKILLed; standby promoted {behind:.0} s behind made {} IDs: \
         {reissued} reissued, {not_above} not above the last handed out",
        stalled_for.as_secs_f64(),
        new_ids.len()
    );
    if renewer {
        assert!(finished_before_crash, "the waiting call did not end");
        assert!(
            stopped_by.starts_with("57014"),
            "expected the waiting call to time out: {stopped_by}"
        );
    } else {
        // Still waiting for the standby when the primary died, its timeout held back.
        assert!(
            !finished_before_crash,
            "the call ended while waiting for the standby: {stopped_by}"
        );
    }
    assert!(behind > 590.0, "the standby's fake clock is not behind");
    assert!(
        after_stop > 0,
        "no ID was handed out while the standby was held back"
    );
    assert_eq!(reissued, 0);
    assert_eq!(not_above, 0);
}
