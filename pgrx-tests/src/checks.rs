//! What tests do with a server: queries with one answer, errors asserted field by field, client
//! programs, batches of IDs, and waiting for a condition.

use postgres::Client;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Sets its flag when dropped. A scope's body holds one for the flag its threads loop on, so
/// that they stop when the body ends by a panic too: `thread::scope` waits for its threads
/// before it passes a panic on, and threads looping until the flag is set would make a failing
/// test hang instead of fail.
pub struct SetOnDrop<'a>(pub &'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// An error as the server worded it, with its SQLSTATE.
pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// Asserts that `err` is an error the server raised with this SQLSTATE, message, DETAIL and HINT,
/// and returns it. `None` leaves DETAIL or HINT unchecked; an expected text that ends in `…`
/// matches every text that starts with what comes before the `…`.
pub fn assert_error<'e>(
    err: &'e postgres::Error,
    sqlstate: &str,
    message: &str,
    detail: Option<&str>,
    hint: Option<&str>,
) -> &'e postgres::error::DbError {
    let db = err
        .as_db_error()
        .unwrap_or_else(|| panic!("not an error of the server: {err}"));
    let full = format!(
        "{} {}\nDETAIL: {:?}\nHINT: {:?}",
        db.code().code(),
        db.message(),
        db.detail(),
        db.hint()
    );
    let matches = |expected: &str, actual: Option<&str>| match expected.strip_suffix('…') {
        Some(prefix) => actual.is_some_and(|actual| actual.starts_with(prefix)),
        None => actual == Some(expected),
    };
    assert_eq!(db.code().code(), sqlstate, "the SQLSTATE of:\n{full}");
    assert!(
        matches(message, Some(db.message())),
        "expected the message {message:?}, got:\n{full}"
    );
    if let Some(detail) = detail {
        assert!(
            matches(detail, db.detail()),
            "expected the DETAIL {detail:?}, got:\n{full}"
        );
    }
    if let Some(hint) = hint {
        assert!(
            matches(hint, db.hint()),
            "expected the HINT {hint:?}, got:\n{full}"
        );
    }
    db
}

/// The first column of the first row of `sql` on `client`; panics with the server's error.
pub fn one<T: for<'a> postgres::types::FromSql<'a>>(client: &mut Client, sql: &str) -> T {
    client
        .query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)))
        .get(0)
}

/// [`one`] of a query that counts (a `bigint`).
/// The logical replication errors this server's subscriptions met (`pg_stat_subscription_stats`:
/// apply and sync errors; the sync count is split in two, tables and sequences, from PostgreSQL
/// 19 on).
pub fn replication_errors(client: &mut Client) -> i64 {
    let sync = if crate::paths::pg_major() >= 19 {
        "sync_table_error_count + sync_seq_error_count"
    } else {
        "sync_error_count"
    };
    count(
        client,
        &format!(
            "SELECT coalesce(sum(apply_error_count + {sync}), 0)::bigint
             FROM pg_stat_subscription_stats"
        ),
    )
}

pub fn count(client: &mut Client, sql: &str) -> i64 {
    one(client, sql)
}

/// Runs `program` (a path, or a name looked up on PATH) with `args` and returns its standard
/// output; panics with everything it printed when it fails.
pub fn run(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> String {
    let program = Path::new(program.as_ref());
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
    assert!(
        output.status.success(),
        "{} {args:?} failed:\n{}{}",
        program.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `SELECT snowflake_nextval()` `count` times on one connection, in statements of `batch` IDs,
/// returning the IDs in the order they were made.
pub fn take_ids(client: &mut Client, count: usize, batch: usize) -> Vec<i64> {
    let statement = client
        .prepare("SELECT snowflake_nextval() FROM generate_series(1, $1::int)")
        .expect("prepare");
    let mut ids = Vec::with_capacity(count);
    while ids.len() < count {
        let n = batch.min(count - ids.len()) as i32;
        for row in client
            .query(&statement, &[&n])
            .expect("snowflake_nextval()")
        {
            ids.push(row.get::<_, i64>(0));
        }
    }
    ids
}

pub fn strictly_increasing(ids: &[i64]) -> bool {
    ids.windows(2).all(|w| w[0] < w[1])
}

/// Polls `done` every 100 ms until it returns true; panics with `what` after `timeout`.
/// Returns how long it took.
pub fn wait_until(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}
