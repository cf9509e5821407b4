//! Never a duplicate: under heavy concurrency, through a clock stepping back, across a crash and
//! a clean restart with the clock set back, and across failover to a standby whose clock is
//! behind. Real servers, real SIGKILLs, a real streaming standby, and libfaketime for the clock.

use postgres::Client;
use snowflake_it::{
    assert_error, describe, strictly_increasing, take_ids, wait_until, Config, Server,
};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn stats_i64(server: &Server, column: &str) -> i64 {
    server.query_one(&format!("SELECT {column} FROM snowflake_stats()"))
}

/// Clients inserting into `t(id)` in small autocommit statements until `stop` is set or the
/// server goes away; returns every ID whose INSERT was acknowledged (committed).
fn insert_until_stopped(server: &Server, clients: usize, stop: Arc<AtomicBool>) -> Vec<i64> {
    thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                let mut client = server.connect();
                let stop = stop.clone();
                scope.spawn(move || {
                    let mut acknowledged = vec![];
                    while !stop.load(Ordering::Relaxed) {
                        match client.query(
                            "INSERT INTO t SELECT FROM generate_series(1, 100) RETURNING id",
                            &[],
                        ) {
                            Ok(rows) => {
                                acknowledged.extend(rows.iter().map(|r| r.get::<_, i64>(0)))
                            }
                            Err(_) => break,
                        }
                    }
                    acknowledged
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// Runs inserting clients for `seconds`, then `interrupt` (a crash) while they still run.
fn insert_then(
    server: &Server,
    clients: usize,
    seconds: u64,
    interrupt: impl FnOnce(),
) -> Vec<i64> {
    let stop = Arc::new(AtomicBool::new(false));
    thread::scope(|scope| {
        let inserting = scope.spawn(|| insert_until_stopped(server, clients, stop.clone()));
        thread::sleep(Duration::from_secs(seconds));
        interrupt();
        stop.store(true, Ordering::Relaxed);
        inserting.join().unwrap()
    })
}

fn new_ids(server: &Server, count: usize) -> Vec<i64> {
    let ids = take_ids(&mut server.connect(), count, 1000);
    assert!(strictly_increasing(&ids));
    ids
}

#[test]
fn sixteen_clients_insert_100_000_rows_each_into_one_primary_key() {
    const CLIENTS: i32 = 16;
    const ROWS: i32 = 100_000;
    const BATCH: i32 = 5_000;
    let server = Server::start("16x100k", Config::node(9));
    server.execute(
        "CREATE TABLE items (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                             client int NOT NULL, n int NOT NULL)",
    );
    let started = Instant::now();
    thread::scope(|scope| {
        for client_no in 0..CLIENTS {
            let mut client = server.connect();
            scope.spawn(move || {
                for from in (1..=ROWS).step_by(BATCH as usize) {
                    client
                        .execute(
                            "INSERT INTO items (client, n)
                             SELECT $1, g FROM generate_series($2::int, $3::int) g",
                            &[&client_no, &from, &(from + BATCH - 1)],
                        )
                        .expect("no unique violation");
                }
            });
        }
    });
    let elapsed = started.elapsed();
    let mut client = server.connect();
    let row = client
        .query_one(
            "SELECT count(*), count(DISTINCT id),
                    (SELECT count(*) FROM (
                        SELECT id <= lag(id) OVER (PARTITION BY client ORDER BY n) AS out_of_order
                        FROM items) s WHERE out_of_order),
                    count(DISTINCT snowflake_node_id(id))
             FROM items",
            &[],
        )
        .unwrap();
    let (rows, distinct, out_of_order, nodes): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    println!(
        "{CLIENTS} clients x {ROWS} rows: {rows} rows, {distinct} distinct ids, {out_of_order} out of \
         order, {:.1} s ({:.0} rows/s)",
        elapsed.as_secs_f64(),
        rows as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(rows, i64::from(CLIENTS * ROWS));
    assert_eq!(distinct, rows);
    assert_eq!(out_of_order, 0);
    assert_eq!(nodes, 1);
}

#[test]
fn clock_stepping_back_an_hour_while_running_neither_stalls_nor_repeats() {
    let server = Server::start("stepback", Config::node(3).fake_clock("+0"));
    let mut client = server.connect();
    let statement = client
        .prepare("SELECT snowflake_nextval() FROM generate_series(1, 1000)")
        .unwrap();
    let mut ids = vec![];
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    let mut stepped = false;
    // A second at the real time, then the step and three seconds of IDs after it (backends
    // read the fake clock's offset within a second): a generator that followed the step would
    // make an ID below the one before, one that waited for the clock a slow statement.
    while started.elapsed() < Duration::from_secs(4) {
        if !stepped && started.elapsed() > Duration::from_secs(1) {
            server.set_clock("-1h");
            stepped = true;
        }
        let call = Instant::now();
        ids.extend(
            client
                .query(&statement, &[])
                .unwrap()
                .iter()
                .map(|r| r.get::<_, i64>(0)),
        );
        slowest = slowest.max(call.elapsed());
    }
    let behind = server.clock_behind_s();
    let regressions = stats_i64(&server, "clock_regressions");
    let lead = stats_i64(&server, "lead_ms");
    println!(
        "{} IDs over 4 s with the clock stepped back 1 h after 1 s: clock now {behind:.0} s behind, \
         slowest 1000-ID statement {:.1} ms, clock_regressions {regressions}, lead {lead} ms",
        ids.len(),
        slowest.as_secs_f64() * 1000.0
    );
    assert!(behind > 3500.0, "the fake clock did not step back");
    assert!(strictly_increasing(&ids));
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    assert!(slowest < Duration::from_secs(1), "generation stalled");
    assert!(regressions >= 1);
    assert!(lead > 3_500_000, "lead {lead} ms");
    let log = server.log();
    for line in [
        "WARNING:  the system clock stepped back by",
        "DETAIL:  pg_snowflake keeps making IDs from its own clock, which runs ahead of the system clock until that catches up; IDs stay unique and increasing.",
        "HINT:  Check the server's time synchronisation.",
    ] {
        assert!(log.contains(line), "expected {line:?} in the log");
    }
}

#[test]
fn crash_under_insert_load_then_restart_with_the_clock_10_minutes_behind() {
    let server = Server::start("crash", Config::node(4).fake_clock("+0"));
    server.execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())");
    let acknowledged = insert_then(&server, 4, 3, || server.crash());
    let before_max = *acknowledged.iter().max().unwrap();

    server.set_clock("-10m");
    server.start_again();
    let behind = server.clock_behind_s();
    let (rows, committed_max): (i64, i64) = {
        let row = server
            .connect()
            .query_one("SELECT count(*), max(id) FROM t", &[])
            .unwrap();
        (row.get(0), row.get(1))
    };
    let after = new_ids(&server, 10_000);
    println!(
        "crash: {} IDs acknowledged before SIGKILL, {rows} rows survived; restarted {behind:.0} s \
         behind; first new ID {} > max before {before_max}",
        acknowledged.len(),
        after[0]
    );
    assert!(behind > 590.0, "the fake clock did not step back");
    assert!(rows >= acknowledged.len() as i64, "acknowledged rows lost");
    assert!(committed_max >= before_max);
    assert!(
        after[0] > committed_max,
        "a new ID is not above the IDs before the crash"
    );
    // And the table takes new rows without a conflict.
    server.execute("INSERT INTO t SELECT FROM generate_series(1, 10000)");
}

#[test]
fn clean_restart_with_the_clock_an_hour_behind() {
    let server = Server::start("restart", Config::node(5).fake_clock("+0"));
    let before = new_ids(&server, 50_000);
    server.stop();
    server.set_clock("-1h");
    server.start_again();
    let behind = server.clock_behind_s();
    let after = new_ids(&server, 50_000);
    println!(
        "clean restart {behind:.0} s behind: last ID before {}, first after {}",
        before.last().unwrap(),
        after[0]
    );
    assert!(behind > 3500.0, "the fake clock did not step back");
    assert!(after[0] > *before.last().unwrap());
}

#[test]
fn promoted_standby_with_its_clock_behind_never_reissues_the_primarys_ids() {
    let primary = Server::start("primary", Config::node(7));
    primary.execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())");
    let standby = Server::standby_of(&primary, "standby", Config::default().fake_clock("-10m"));
    // Synchronous replication: a commit returns once the standby has its WAL.
    primary.make_standby_synchronous();

    // A standby refuses to make IDs.
    let refused = standby
        .connect()
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_err();
    assert_error(
        &refused,
        "25006",
        "cannot make snowflake IDs during recovery",
        None,
        None,
    );

    let acknowledged = insert_then(&primary, 4, 3, || primary.crash());
    let before_max = *acknowledged.iter().max().unwrap();
    standby.promote();
    let behind = standby.clock_behind_s();
    let committed_max: i64 = standby.query_one("SELECT max(id) FROM t");
    let after = new_ids(&standby, 10_000);
    println!(
        "failover: {} IDs acknowledged by the primary before SIGKILL; promoted standby {behind:.0} s \
         behind; first new ID {} > max before {before_max}",
        acknowledged.len(),
        after[0]
    );
    assert!(behind > 590.0, "the standby's fake clock is not behind");
    assert!(
        committed_max >= before_max,
        "synchronous replication lost rows"
    );
    assert!(
        after[0] > before_max,
        "the promoted standby reissued the primary's IDs"
    );
    assert_eq!(
        standby.query_one::<i32>("SELECT snowflake_node_id(snowflake_nextval())"),
        7
    );
    standby.execute("INSERT INTO t SELECT FROM generate_series(1, 10000)");
}

#[test]
fn the_end_of_the_time_field_is_an_error_never_a_negative_id() {
    let server = Server::start("end", Config::node(1).fake_clock("@2093-09-06 15:47:33"));
    let last = new_ids(&server, 1000);
    let decoded: String = server.query_one(&format!(
        "SELECT to_char(snowflake_timestamp({}) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI')",
        last.last().unwrap()
    ));
    assert!(last.iter().all(|&id| id > 0));
    assert_eq!(decoded, "2093-09-06 15:47");

    // Past the end (restarted there, so that the whole server sees the new time at once).
    server.stop();
    server.set_clock("@2093-09-06 15:50:00");
    server.start_again();
    let mut client: Client = server.connect();
    let err = client
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_err();
    println!("past the end: {}", describe(&err));
    assert_error(
        &err,
        "2200H",
        "snowflake time field is exhausted",
        Some("The time field of this layout ends at 2093-09-06 15:47:35.551 UTC."),
        Some("No more IDs can be made with this layout and epoch; check the server's clock."),
    );
}

/// A server whose clock reads before the epoch does not start (the epoch would be in the
/// future: layouts.rs); one whose clock steps back before it before its first ID refuses IDs.
#[test]
fn a_clock_before_the_epoch_before_the_first_id_is_refused_with_the_reason() {
    let server = Server::start("beforeepoch", Config::node(1).fake_clock("+0"));
    // Back to a month before 2024-01-01, whatever today's date.
    let days_since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .saturating_sub(1_704_067_200)
        / 86_400;
    server.set_clock(&format!("-{}d", days_since_epoch + 30));
    // A backend that sees the new time (libfaketime re-reads its file within a second or so).
    let mut client = server.connect();
    wait_until(Duration::from_secs(20), "the clock before 2024", || {
        client = server.connect();
        client
            .query_one("SELECT now() < '2024-01-01'", &[])
            .unwrap()
            .get(0)
    });
    let err = client
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_err();
    assert_error(
        &err,
        "22008",
        "the server's clock is before the snowflake epoch",
        Some("The clock reads 2023-…"),
        Some("Set the server's clock to the correct time."),
    );
}
