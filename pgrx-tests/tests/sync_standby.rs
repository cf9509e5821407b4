//! Every ID handed out is covered on the synchronous standby, not only every ID stored: a
//! reservation counts only once the synchronous standby has flushed its WAL record, so IDs
//! returned by a plain SELECT (kept by the application elsewhere, never written to a table) are
//! never issued again by the standby once it is promoted, even with its clock behind.
//!
//! The test holds the standby's WAL receiver back (SIGSTOP) while IDs are handed out, so that
//! everything written after that point is lost with the primary: only what the standby had
//! before protects the IDs.

use snowflake_it::{Config, Server};
use std::collections::HashSet;
use std::time::{Duration, Instant};

#[test]
fn ids_handed_out_by_select_are_never_reissued_after_failover_to_a_synchronous_standby() {
    let primary = Server::start("syncprim", Config::node(7));
    let standby = Server::standby_of(&primary, "syncstby", Config::default().fake_clock("-10m"));
    primary.make_standby_synchronous();

    let mut client = primary.connect();
    let statement = client
        .prepare("SELECT snowflake_nextval() FROM generate_series(1, 1000)")
        .unwrap();
    let mut handed_out: Vec<i64> = vec![];
    for _ in 0..20 {
        handed_out.extend(
            client
                .query(&statement, &[])
                .unwrap()
                .iter()
                .map(|r| r.get::<_, i64>(0)),
        );
    }
    let before_stop = handed_out.len();

    // Hold the standby's WAL receiver back: from now on the standby receives nothing.
    let receiver: i32 = standby.query_one("SELECT pid FROM pg_stat_wal_receiver");
    standby.as_postgres(&format!("kill -STOP {receiver}"));

    // Hand out IDs by SELECT until a call has to wait for a reservation the standby cannot
    // confirm (it then waits until its statement timeout).
    client
        .batch_execute("SET statement_timeout = '3s'")
        .unwrap();
    let started = Instant::now();
    let stopped_by = loop {
        match client.query(&statement, &[]) {
            Ok(rows) => handed_out.extend(rows.iter().map(|r| r.get::<_, i64>(0))),
            Err(e) => break snowflake_it::describe(&e),
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "IDs kept coming without the standby confirming a reservation"
        );
    };
    let after_stop = handed_out.len() - before_stop;

    primary.crash();
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
        "synchronous standby held back: {before_stop} IDs handed out by SELECT before, \
         {after_stop} after its WAL receiver stopped (then: {stopped_by}); primary SIGKILLed; \
         standby promoted {behind:.0} s behind made {} IDs: {reissued} reissued, {not_above} not \
         above the last handed out",
        new_ids.len()
    );
    assert!(
        stopped_by.starts_with("57014"),
        "expected the waiting call to time out: {stopped_by}"
    );
    assert!(behind > 590.0, "the standby's fake clock is not behind");
    assert!(
        after_stop > 0,
        "no ID was handed out while the standby was held back"
    );
    assert_eq!(reissued, 0);
    assert_eq!(not_above, 0);
}
