//! A stalled disk does not stall ID generation behind a lock: the durable reservation is renewed
//! ahead of need by the renewer, and a call that does have to wait for it (the issued time has
//! caught up with the reservation) waits interruptibly, so `statement_timeout` ends it on time.
//! The server runs with an fsync-delaying LD_PRELOAD shim (`scripts/fsync-delay.c`).

use snowflake_it::{describe, strictly_increasing, take_ids, Config, Server};
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
