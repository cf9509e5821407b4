//! Forward steps of the clock: a wall clock that leaps ahead — a glitch, a bad hardware clock,
//! a VM resumed after a suspend — never stamps IDs in the future for years, never reserves the
//! rest of the time field, and never leaves a node unable to make IDs. A step is held (IDs go
//! on with the monotonic clock's account of time) and followed only once it has lasted 30 s. A
//! lead that did happen is dropped by giving the server a node id it never used. Real servers,
//! libfaketime for the wall clock (the monotonic clock stays real).

use snowflake_it::{describe, strictly_increasing, take_ids, Config, Server};
use std::time::{Duration, Instant};

/// The real time, Unix ms.
fn real_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The time an ID is stamped with, Unix ms.
fn stamped_ms(server: &Server, id: i64) -> i64 {
    server.query_one(&format!(
        "SELECT (extract(epoch FROM snowflake_timestamp({id})) * 1000)::bigint"
    ))
}

fn stats_i64(server: &Server, column: &str) -> i64 {
    server.query_one(&format!("SELECT {column} FROM snowflake_stats()"))
}

/// How far (ms) the durable reservation reaches past the real time.
fn reserved_ahead_ms(server: &Server) -> i64 {
    let until: i64 = server.query_one(
        "SELECT coalesce((extract(epoch FROM reserved_until) * 1000)::bigint, 0) \
         FROM snowflake_stats()",
    );
    until - real_now_ms()
}

/// The steps the server log warns of holding, in ms.
fn held_steps_ms(server: &Server) -> Vec<i64> {
    server
        .log()
        .lines()
        .filter_map(|line| line.split("WARNING:  the system clock leapt ").nth(1))
        .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
        .collect()
}

/// Waits until the server's backends see the fake clock set last (it is reread every second).
fn settle() {
    std::thread::sleep(Duration::from_millis(2_200));
}

#[test]
fn a_clock_70_years_ahead_for_a_moment_does_not_exhaust_the_time_field() {
    let server = Server::start("jump70", Config::node(4).fake_clock("+0"));
    let mut ids = take_ids(&mut server.connect(), 1_000, 100);
    server.set_clock("+25600d"); // past the end of the default layout's field (2093)
    settle();
    // Held: the call is served with the real time, not refused, and nothing is reserved for
    // the far future.
    let during: i64 = server.query_one("SELECT snowflake_nextval()");
    let off_ms = stamped_ms(&server, during) - real_now_ms();
    assert!(
        off_ms.abs() < 10_000,
        "stamped {off_ms} ms off the real time"
    );
    assert_eq!(stats_i64(&server, "clock_jumps"), 1);
    std::thread::sleep(Duration::from_secs(2)); // the renewer's turns
    let ahead = reserved_ahead_ms(&server);
    assert!(
        ahead < 120_000,
        "reserved {ahead} ms ahead of the real time"
    );
    ids.push(during);
    // The clock set right, the server restarted: IDs at once, at the real time.
    server.set_clock("+0");
    settle();
    server.stop();
    server.start_again();
    let after = take_ids(&mut server.connect(), 1_000, 100);
    let off_ms = stamped_ms(&server, after[0]) - real_now_ms();
    assert!(
        off_ms.abs() < 10_000,
        "stamped {off_ms} ms off after the restart"
    );
    ids.extend(after);
    assert!(strictly_increasing(&ids));
    let steps = held_steps_ms(&server);
    assert!(
        steps.len() == 1 && (steps[0] - 25_600 * 86_400_000).abs() < 5_000,
        "the warnings of held steps: {steps:?}"
    );
}

#[test]
fn a_glitch_ten_years_ahead_leaves_no_lead_behind() {
    let server = Server::start("glitch10", Config::node(5).fake_clock("+0"));
    let mut ids = take_ids(&mut server.connect(), 1_000, 100);
    server.set_clock("+3650d");
    settle();
    ids.extend(take_ids(&mut server.connect(), 100, 10));
    server.set_clock("+0");
    settle();
    ids.extend(take_ids(&mut server.connect(), 1_000, 100));
    assert!(strictly_increasing(&ids));
    let lead = stats_i64(&server, "lead_ms");
    assert!(lead < 1_000, "a lead of {lead} ms after the glitch");
    for id in [ids[1_050], ids[ids.len() - 1]] {
        let off_ms = stamped_ms(&server, id) - real_now_ms();
        assert!(
            off_ms.abs() < 10_000,
            "stamped {off_ms} ms off the real time"
        );
    }
    assert!(reserved_ahead_ms(&server) < 120_000);
}

/// Like a VM resumed after a day's suspend: the wall clock jumps a day, the monotonic clock
/// does not, and the step stays. IDs keep the monotonic clock's time for 30 s, then follow.
#[test]
fn a_step_that_lasts_is_followed_after_thirty_seconds() {
    let server = Server::start("resume", Config::node(6).fake_clock("+0"));
    let mut client = server.connect();
    let _ = take_ids(&mut client, 100, 10);
    server.set_clock("+1d");
    settle();
    let statement = client.prepare("SELECT snowflake_nextval()").unwrap();
    let started = Instant::now();
    // When, from the step's settling, the IDs held the real time and followed the new one:
    // timed, not counted, as a busy machine answers fewer statements in the same seconds.
    let (mut held, mut followed, mut ids) = (vec![], vec![], vec![]);
    while started.elapsed() < Duration::from_secs(40) {
        let id: i64 = client.query_one(&statement, &[]).unwrap().get(0);
        let off_ms = stamped_ms(&server, id) - real_now_ms();
        if off_ms.abs() < 10_000 {
            held.push(started.elapsed());
            assert!(
                followed.is_empty(),
                "back to the real time after following the step"
            );
        } else {
            assert!(
                (off_ms - 86_400_000).abs() < 10_000,
                "stamped {off_ms} ms off"
            );
            followed.push(started.elapsed());
        }
        ids.push(id);
        std::thread::sleep(Duration::from_millis(100));
    }
    let (held_until, followed_from) = (held.last().copied(), followed.first().copied());
    println!(
        "a day's step: {} IDs held at the real time until {held_until:?}, then {} at the new one \
         from {followed_from:?}",
        held.len(),
        followed.len()
    );
    // Held 30 s from when the server saw the step: between it and `started` (settle's 2.2 s),
    // with a busy machine's second either side.
    assert!(
        held_until.is_some_and(|t| t >= Duration::from_secs(26))
            && followed_from.is_some_and(|t| t <= Duration::from_secs(34)),
        "held until {held_until:?}, followed from {followed_from:?}"
    );
    assert!(strictly_increasing(&ids));
    let steps = held_steps_ms(&server);
    assert!(
        steps.len() == 1 && (steps[0] - 86_400_000).abs() < 5_000,
        "the warnings of held steps: {steps:?}"
    );
    assert!(server.log().contains("pg_snowflake follows it now"));
}

/// One ID and the server's own clock (Unix ms) right after it, in one statement.
fn id_and_clock(client: &mut postgres::Client) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT snowflake_nextval(), \
             (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// Small forward steps, each followed at once (under `FORWARD_STEP_MS` past the last call), are
/// not taken for a leap at the next pause: the generator's account of what the clock should
/// read follows them too.
#[test]
fn small_steps_that_were_followed_are_not_held_after_a_pause() {
    let server = Server::start("smallsteps", Config::node(10).fake_clock("+0"));
    let mut client = server.connect();
    let _ = take_ids(&mut client, 100, 10);
    // +8, +16, +24 s. A backend sees a new offset 1 to 2 s after it is written: until this one
    // does, an ID every 100 ms, so that the step comes 8 s past the last call (followed at once,
    // without a look at the monotonic clock before the fix). The first ID after the step is
    // stamped with the server's clock: followed.
    for step_s in [8, 16, 24] {
        server.set_clock(&format!("+{step_s}"));
        let (id, clock_ms) = loop {
            let (id, clock_ms) = id_and_clock(&mut client);
            if clock_ms - real_now_ms() > step_s * 1_000 - 1_000 {
                break (id, clock_ms);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let off_ms = stamped_ms(&server, id) - clock_ms;
        assert!(
            off_ms.abs() < 1_000,
            "after the +{step_s} s step: stamped {off_ms} ms off the server's clock"
        );
    }
    // 12 s with no call, then one: stamped with the server's clock, nothing held or warned of.
    std::thread::sleep(Duration::from_secs(12));
    let (id, clock_ms) = id_and_clock(&mut client);
    let off_ms = stamped_ms(&server, id) - clock_ms;
    let steps = held_steps_ms(&server);
    println!("after the pause: stamped {off_ms} ms off the server's clock, held steps {steps:?}");
    assert!(steps.is_empty(), "the warnings of held steps: {steps:?}");
    assert_eq!(stats_i64(&server, "clock_jumps"), 0);
    assert!(
        off_ms.abs() < 1_000,
        "stamped {off_ms} ms off the server's clock"
    );
}

/// A forward glitch that the calls hold (30 s: over `FORWARD_STEP_MS`) is not written into the
/// durable reservation by the renewer between calls either: it keeps the reservation ahead of
/// the clock the calls follow, not of its own wall clock.
#[test]
fn a_glitch_the_calls_hold_is_not_reserved_between_calls() {
    let server = Server::start("glitch30", Config::node(11).fake_clock("+0"));
    let mut client = server.connect();
    let _ = take_ids(&mut client, 100, 10);
    server.set_clock("+30");
    // The renewer sees the glitch within 2 s, a few seconds after the last call.
    let furthest_ahead = |for_s: u64| {
        let started = Instant::now();
        let mut furthest = i64::MIN;
        while started.elapsed() < Duration::from_secs(for_s) {
            furthest = furthest.max(reserved_ahead_ms(&server));
            std::thread::sleep(Duration::from_millis(100));
        }
        furthest
    };
    let before_call = furthest_ahead(5);
    // A call during the glitch: held, stamped with the real time.
    let (id, clock_ms) = id_and_clock(&mut client);
    let glitch_ms = clock_ms - real_now_ms();
    let off_ms = stamped_ms(&server, id) - real_now_ms();
    let after_call = furthest_ahead(3);
    server.set_clock("+0");
    println!(
        "a glitch of {glitch_ms} ms: reserved at most {before_call} ms ahead of the real time \
         before the call, {after_call} ms after it; the call stamped {off_ms} ms off"
    );
    assert!(
        glitch_ms > 29_000,
        "the server's clock is {glitch_ms} ms ahead"
    );
    assert!(
        off_ms.abs() < 1_000,
        "stamped {off_ms} ms off the real time"
    );
    assert_eq!(stats_i64(&server, "clock_jumps"), 1);
    assert!(
        before_call < 5_000 && after_call < 5_000,
        "reserved {before_call} ms, then {after_call} ms past the real time"
    );
}

#[test]
fn a_server_started_with_its_clock_past_the_field_reserves_nothing_and_recovers() {
    let server = Server::start("bootahead", Config::node(7).fake_clock("+25600d"));
    std::thread::sleep(Duration::from_secs(2));
    let reserved: Option<String> =
        server.query_one("SELECT reserved_until::text FROM snowflake_stats()");
    assert_eq!(reserved, None, "reserved with no call");
    let err = server
        .connect()
        .query_one("SELECT snowflake_nextval()", &[])
        .expect_err("a clock past the field");
    let said = describe(&err);
    assert!(said.contains("time field is exhausted"), "{said}");
    std::thread::sleep(Duration::from_secs(2));
    server.set_clock("+0");
    settle();
    let id: i64 = server.query_one("SELECT snowflake_nextval()");
    assert!((stamped_ms(&server, id) - real_now_ms()).abs() < 10_000);
    server.stop();
    server.start_again();
    let _: i64 = server.query_one("SELECT snowflake_nextval()");
}

/// The remedy for a lead that did happen: a node id the server never used owes nothing to the
/// old one's IDs; switched back, the old one resumes above its own.
#[test]
fn a_fresh_node_id_drops_a_lead_and_an_old_one_resumes_above_its_ids() {
    let server = Server::start("switch", Config::node(8).fake_clock("+1h"));
    let on_8 = take_ids(&mut server.connect(), 1_000, 100);
    server.set_clock("+0");
    settle();
    let lead = stats_i64(&server, "lead_ms");
    assert!(
        lead > 3_000_000,
        "a lead of {lead} ms after stepping back an hour"
    );
    server.execute("ALTER SYSTEM SET pg_snowflake.node_id = 9");
    server.stop();
    server.start_again();
    let on_9: i64 = server.query_one("SELECT snowflake_nextval()");
    assert_eq!(
        server.query_one::<i32>(&format!("SELECT snowflake_node_id({on_9})")),
        9
    );
    let off_ms = stamped_ms(&server, on_9) - real_now_ms();
    assert!(
        off_ms.abs() < 10_000,
        "node 9 stamped {off_ms} ms off: the lead was kept"
    );
    assert!(server.log().contains("node id changed from 8 to 9"));
    // Back to 8: above every ID node 8 made, though the clock is an hour behind them.
    server.execute("ALTER SYSTEM SET pg_snowflake.node_id = 8");
    server.stop();
    server.start_again();
    let again: i64 = server.query_one("SELECT snowflake_nextval()");
    assert!(
        again > *on_8.last().unwrap(),
        "node 8 again: {again} <= its old {}",
        on_8.last().unwrap()
    );
}
