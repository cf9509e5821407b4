//! A stalled disk does not stall ID generation behind a lock: the durable reservation is renewed
//! ahead of need by the renewer, and a call that does have to wait for it (the issued time has
//! caught up with the reservation) waits interruptibly, so `statement_timeout` ends it on time.
//! The server runs with an fsync-delaying LD_PRELOAD shim (`pgrx-tests/fsync-delay.c`).

use snowflake_it::{describe, strictly_increasing, take_ids, wait_until, Config, Server};
use std::time::{Duration, Instant};

/// How long each fsync and fdatasync sleeps while the disk is stalled.
const STALL_MS: u64 = 3_000;

#[test]
fn statement_timeout_ends_a_call_waiting_for_a_reservation_on_a_stalled_disk() {
    // Short reservations, so that the issued time catches up with a stalled renewal quickly.
    let server = Server::start(
        "stall",
        Config::node(3)
            .slow_disk()
            .setting("pg_snowflake.reservation_ms = 100"),
    );
    let before = take_ids(&mut server.connect(), 1_000, 1_000);
    let mut client = server.connect();
    client
        .batch_execute("SET statement_timeout = '200ms'")
        .unwrap();
    let statement = client.prepare("SELECT snowflake_nextval()").unwrap();

    server.set_fsync_delay_ms(STALL_MS);
    // Calls go on under the reservation already written, then one has to wait for the stalled
    // renewal: it must end by its statement timeout, not by the disk.
    let started = Instant::now();
    let (mut served, mut slowest_served) = (vec![], Duration::ZERO);
    let (cancelled_after, error) = loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no call had to wait for the stalled renewal"
        );
        let call = Instant::now();
        match client.query_one(&statement, &[]) {
            Ok(row) => {
                served.push(row.get::<_, i64>(0));
                slowest_served = slowest_served.max(call.elapsed());
            }
            Err(e) => break (call.elapsed(), describe(&e)),
        }
    };
    let stats = server
        .connect()
        .query_one(
            "SELECT reservations, overload_waits FROM snowflake_stats()",
            &[],
        )
        .unwrap();
    println!(
        "fsync stalled {STALL_MS} ms: {} calls served first (slowest {:.1} ms), then one waiting \
         for the renewal ended after {:.0} ms with statement_timeout = 200ms: {error}; \
         reservations so far {}",
        served.len(),
        slowest_served.as_secs_f64() * 1000.0,
        cancelled_after.as_secs_f64() * 1000.0,
        stats.get::<_, i64>(0),
    );
    assert_eq!(error, "57014 canceling statement due to statement timeout");
    // The disk would have held it for at least STALL_MS; the timeout ended it at ~200 ms. The
    // bound is generous for a loaded machine and still far below the stall.
    assert!(
        cancelled_after < Duration::from_millis(STALL_MS / 2),
        "the waiting call took {cancelled_after:?}"
    );

    // Once the disk recovers, IDs continue, above everything handed out before.
    server.set_fsync_delay_ms(0);
    client.batch_execute("SET statement_timeout = 0").unwrap();
    let after = take_ids(&mut client, 1_000, 1_000);
    let mut all = before;
    all.extend(served);
    all.extend(after);
    assert!(strictly_increasing(&all));
}

#[test]
fn on_a_disk_slower_than_half_the_reservation_reservations_reach_further_ahead() {
    // Every fsync +200 ms: a renewal (state file, its directory, the WAL record) takes at least
    // 600 ms, more than the half of a 1 s reservation it is started with.
    const SLOW_MS: u64 = 200;
    let server = Server::start(
        "slower",
        Config::node(4)
            .slow_disk()
            .setting("pg_snowflake.reservation_ms = 1000"),
    );
    let mut client = server.connect();
    let mut watcher = server.connect();
    let statement = client.prepare("SELECT snowflake_nextval()").unwrap();
    let lead = watcher
        .prepare(
            "SELECT (extract(epoch FROM reserved_until - clock_timestamp()) * 1000)::float8 \
             FROM snowflake_stats()",
        )
        .unwrap();
    let mut ids = take_ids(&mut client, 1_000, 1_000);

    server.set_fsync_delay_ms(SLOW_MS);
    let (started, mut last_sample) = (Instant::now(), Instant::now());
    let (mut longest_lead_ms, mut slowest_call) = (0f64, Duration::ZERO);
    while started.elapsed() < Duration::from_secs(8) {
        let call = Instant::now();
        ids.push(client.query_one(&statement, &[]).unwrap().get(0));
        if started.elapsed() > Duration::from_secs(4) {
            slowest_call = slowest_call.max(call.elapsed());
        }
        if last_sample.elapsed() > Duration::from_millis(50) {
            last_sample = Instant::now();
            let ms: f64 = watcher.query_one(&lead, &[]).unwrap().get(0);
            longest_lead_ms = longest_lead_ms.max(ms);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    server.set_fsync_delay_ms(0);
    ids.extend(take_ids(&mut client, 1_000, 1_000));
    println!(
        "fsync +{SLOW_MS} ms, reservation_ms = 1000: the reservation reached {longest_lead_ms:.0} \
         ms ahead of the clock; the slowest call in the last 4 s took {:.1} ms",
        slowest_call.as_secs_f64() * 1000.0
    );
    // Reservations of a fixed 1 s never lead the clock by more than 1 s; these reach four
    // times the last renewal's duration (at least 4 x 600 ms).
    assert!(
        longest_lead_ms > 1_250.0,
        "the reservation led the clock by {longest_lead_ms:.0} ms at most"
    );
    assert!(strictly_increasing(&ids));
}

#[test]
fn between_calls_the_reservation_stays_ahead_of_the_clock() {
    // 2 s reservations: without calls to ask for renewals, the reservation would fall behind
    // the clock 2 s after the last call, and the first call after the pause would wait for a
    // write (here: three fsyncs of +100 ms). The pause lasts three reservations: a disk slow
    // enough to stretch them (a write of more than 500 ms) would have to take 1.5 s a write to
    // hide a reservation that stops being renewed.
    let server = Server::start(
        "pause",
        Config::node(5)
            .slow_disk()
            .setting("pg_snowflake.reservation_ms = 2000"),
    );
    server.set_fsync_delay_ms(100);
    let mut client = server.connect();
    let mut ids = take_ids(&mut client, 1_000, 1_000);
    let lead = client
        .prepare(
            "SELECT (extract(epoch FROM reserved_until - clock_timestamp()) * 1000)::float8 \
             FROM snowflake_stats()",
        )
        .unwrap();
    let mut leads = vec![];
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(500));
        leads.push(client.query_one(&lead, &[]).unwrap().get::<_, f64>(0));
    }
    ids.extend(take_ids(&mut client, 1_000, 1_000));
    println!(
        "6 s without a call, 2 s reservations: the reservation led the clock by {:.0} ms at \
         least",
        leads.iter().cloned().fold(f64::INFINITY, f64::min)
    );
    assert!(
        leads.iter().all(|&ms| ms > 0.0),
        "the reservation fell behind the clock: {leads:?}"
    );
    assert!(strictly_increasing(&ids));
}

#[test]
fn a_reload_reaches_the_renewer() {
    // The advice for a slow disk is a longer reservation, applied by a reload: the renewer, which
    // keeps the reservation ahead between calls, must read it too (a background worker starts
    // with SIGHUP ignored).
    let server = Server::start("reload", Config::node(6));
    // One call: the renewer keeps the reservation ahead for a minute after it (a server that
    // never made an ID reserves nothing).
    let _: i64 = server.query_one("SELECT snowflake_nextval()");
    let lead_s = || {
        server.query_one::<f64>(
            "SELECT coalesce(extract(epoch FROM reserved_until - clock_timestamp()), -1)::float8 \
             FROM snowflake_stats()",
        )
    };
    wait_until(
        Duration::from_secs(30),
        "the renewer's first reservation",
        || lead_s() > 0.0,
    );
    let before = lead_s();
    assert!(before < 5.0, "a 1 s reservation led by {before:.1} s");
    server.execute("ALTER SYSTEM SET pg_snowflake.reservation_ms = 60000");
    server.execute("SELECT pg_reload_conf()");
    // No call is made: only the renewer can take the reservation a minute ahead.
    let took = wait_until(
        Duration::from_secs(10),
        "the renewer to reserve a minute ahead after the reload",
        || lead_s() > 30.0,
    );
    println!(
        "reservation_ms 1000 -> 60000 by a reload: the renewer led by {before:.1} s before, \
         {:.1} s {:.0} ms after the reload",
        lead_s(),
        took.as_secs_f64() * 1000.0
    );
}
