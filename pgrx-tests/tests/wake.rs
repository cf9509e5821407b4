//! The first call after a quiet minute (docs/SAFETY.md, *The first call after a quiet minute*):
//! on a disk whose every fsync takes seconds, it and the calls right after it are issued at
//! once, at their own time, in the wake range, while their reservation is being written; and a
//! crash before that write lands, then a restart with the clock set back an hour, never issues
//! one of those IDs again, though it makes every ID below the wake range of their milliseconds.
//!
//! The server's sequence field is 3 bits (8 IDs a millisecond; the wake range is the last, 7):
//! small enough that the restarted server fills every millisecond it passes faster than its
//! clock moves, so that it surely passes through all of the wake's (a 4096-wide field is filled
//! at about the clock's own pace, and a millisecond the clock overtakes is left half made).

use snowflake_it::{strictly_increasing, take_ids, wait_until, Config, Server};
use std::time::{Duration, Instant};

/// Every fsync and fdatasync while the wake's reservation is written: the write takes three.
const FSYNC_MS: u64 = 5_000;
/// The sequence field's bits, and the first (here the only) sequence number of its wake range.
const SEQUENCE_BITS: u32 = 3;
const WAKE_SEQ: i32 = 7;
/// The most calls of the wake: one a millisecond of ID time (the wake range is one sequence
/// number wide), so that the wake ends well within the 5 s the restart's batch covers, however
/// fast the machine makes them (5,049 in 300 ms on a quiet one, which ran past it).
const WAKE_CALLS: usize = 2_000;

#[test]
fn the_first_calls_after_a_quiet_minute_wait_for_no_disk_and_a_crash_before_their_write_repeats_none(
) {
    let server = Server::start(
        "wake",
        Config::node(4)
            .slow_disk()
            .fake_clock("+0")
            .setting(&format!("pg_snowflake.sequence_bits = {SEQUENCE_BITS}"))
            .setting("pg_snowflake.max_borrow_ms = 10000"),
    );
    let mut client = server.connect();
    let before = take_ids(&mut client, 1_000, 1_000);

    // The renewer keeps the reservation ahead for a minute after the last call, then lets it
    // run out: wait for that, to a few milliseconds. Its reservations are the default 1 s ones
    // for that minute, so the last runs out a second after it rather than up to ten.
    let ran_out = client
        .prepare("SELECT reserved_until < clock_timestamp() FROM snowflake_stats()")
        .unwrap();
    let quiet = Instant::now();
    while !client.query_one(&ran_out, &[]).unwrap().get::<_, bool>(0) {
        assert!(
            quiet.elapsed() < Duration::from_secs(150),
            "the reservation never ran out"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let quiet_s = quiet.elapsed().as_secs_f64();
    // The wake's reservation and the restart's batch below need 10 s reservations: set, and
    // read back on the connection that makes the wake's calls, before any call and before the
    // disk slows down. Past the minute, the reload has the renewer write nothing.
    client
        .batch_execute("ALTER SYSTEM SET pg_snowflake.reservation_ms = 10000")
        .unwrap();
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_until(Duration::from_secs(10), "the 10 s reservations", || {
        client
            .query_one(
                "SELECT setting FROM pg_settings WHERE name = 'pg_snowflake.reservation_ms'",
                &[],
            )
            .unwrap()
            .get::<_, String>(0)
            == "10000"
    });
    assert!(
        client.query_one(&ran_out, &[]).unwrap().get::<_, bool>(0),
        "the reload wrote a reservation"
    );

    // Now every write takes seconds; the calls of the next 300 ms (at most WAKE_CALLS) must
    // not wait for one.
    server.set_fsync_delay_ms(FSYNC_MS);
    let call = client
        .prepare(
            "SELECT id, snowflake_seq(id), \
                    snowflake_timestamp(id) >= date_trunc('milliseconds', t0), \
                    (extract(epoch FROM snowflake_timestamp(id)) * 1000)::int8 \
             FROM (SELECT clock_timestamp() AS t0, snowflake_nextval() AS id) AS c",
        )
        .unwrap();
    let started = Instant::now();
    let (mut wake, mut wake_ms, mut slowest) = (vec![], vec![], Duration::ZERO);
    while started.elapsed() < Duration::from_millis(300) && wake.len() < WAKE_CALLS {
        let one = Instant::now();
        let row = client.query_one(&call, &[]).unwrap();
        slowest = slowest.max(one.elapsed());
        let (id, seq, not_early): (i64, i32, bool) = (row.get(0), row.get(1), row.get(2));
        assert!(
            seq >= WAKE_SEQ,
            "{id}: sequence {seq}, below the wake range"
        );
        assert!(not_early, "{id} stamped before its call");
        wake.push(id);
        wake_ms.push(row.get::<_, i64>(3));
    }
    let took_ms = started.elapsed().as_millis();
    // Still unwritten: every one of them past the durable reservation.
    let floor_ms: f64 = client
        .query_one(
            "SELECT (extract(epoch FROM reserved_until) * 1000)::float8 FROM snowflake_stats()",
            &[],
        )
        .unwrap()
        .get(0);
    let (first_ms, last_ms) = (wake_ms[0], *wake_ms.last().unwrap());
    let uncovered = floor_ms as i64 <= first_ms;
    println!(
        "after {quiet_s:.1} s without a call, every fsync +{FSYNC_MS} ms: {} calls in {} ms, \
         the slowest {:.1} ms, over {} ms of ID time, sequence {WAKE_SEQ}; their reservation \
         unwritten: {uncovered}",
        wake.len(),
        took_ms,
        slowest.as_secs_f64() * 1000.0,
        last_ms - first_ms + 1,
    );
    assert!(uncovered, "the wake's reservation was written already");
    assert!(
        slowest < Duration::from_millis(FSYNC_MS / 5),
        "a call waited {slowest:?}: for the disk"
    );
    let mut all = before.clone();
    all.extend(&wake);
    assert!(strictly_increasing(&all));

    // A crash before the write lands; the server comes back with its clock an hour behind, so
    // that it makes IDs from its reservation on, through the wake's milliseconds.
    server.crash();
    server.set_fsync_delay_ms(0);
    server.set_clock("-1h");
    server.start_again();
    let mut client = server.connect();
    // From the floor to past the wake's last millisecond, every ID below the wake range (a
    // restart stays below it for an hour): 7 a millisecond, in one batch that runs ahead of the
    // clock.
    let ticks = last_ms - floor_ms as i64 + 20;
    assert!(ticks < 5_000, "the wake ended {ticks} ms after the floor");
    let row = client
        .query_one(
            "WITH after AS (SELECT id FROM snowflake_nextval_batch($1::int) AS id) \
             SELECT count(*), count(DISTINCT id), min(id), max(id), \
                    (SELECT count(*) FROM after WHERE id IN (SELECT unnest($2::int8[]))), \
                    count(*) FILTER (WHERE snowflake_timestamp(id) = snowflake_timestamp($3)), \
                    count(*) FILTER (WHERE snowflake_seq(id) >= $4) \
             FROM after",
            &[
                &((ticks * i64::from(WAKE_SEQ)) as i32),
                &wake,
                &wake[0],
                &WAKE_SEQ,
            ],
        )
        .unwrap();
    let (count, distinct, min, max, repeated, in_first, in_wake_range): (
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
    ) = (
        row.get(0),
        row.get(1),
        row.get(2),
        row.get(3),
        row.get(4),
        row.get(5),
        row.get(6),
    );
    println!(
        "restarted an hour behind, floor {} ms before the wake: {count} IDs through the wake's \
         milliseconds ({in_first} in its first, {in_wake_range} in the wake range), {repeated} \
         of the wake's {} again",
        first_ms - floor_ms as i64,
        wake.len()
    );
    assert_eq!(repeated, 0, "the wake's IDs were issued again");
    assert_eq!(in_wake_range, 0, "IDs in the wake range within the hour");
    assert_eq!(count, distinct);
    // Resumed below the wake (its write never landed), and made IDs through its milliseconds.
    assert!(min < wake[0], "resumed past the wake: its write landed");
    assert!(max > *wake.last().unwrap());
    assert_eq!(
        in_first,
        i64::from(WAKE_SEQ),
        "the wake's first millisecond: every ID below the wake range"
    );
}
