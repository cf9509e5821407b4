//! `snowflake_watermark()` (docs/GUIDE.md, *Polling for new rows*): a poller that reads
//! `id > last AND id < snowflake_watermark()` sees every committed row exactly once, in order,
//! while writers on many connections commit, abort, roll back to savepoints and prepare
//! transactions that another connection commits later; a poller on `id > last` alone misses
//! rows in the same run. Then, one at a time: IDs drawn and never inserted, a subtransaction
//! rolled back, a backend terminated mid-transaction, a prepared transaction across a backend's
//! SIGKILL and a crash, and a standby's refusal.

use postgres::Client;
use snowflake_it::registry::log_lines_since;
use snowflake_it::{assert_error, wait_until, Config, Server};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// Committed rows the run makes at least.
const ROWS: usize = 100_000;
const WRITERS: usize = 8;

/// A small deterministic generator (xorshift), seeded per writer: no crate needed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn server(name: &str) -> Server {
    let server = Server::start(
        name,
        Config::node(3).setting("max_prepared_transactions = 16"),
    );
    server.execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), w int)");
    server
}

fn ids(client: &mut Client, sql: &str) -> Vec<i64> {
    client
        .query(sql, &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn watermark(client: &mut Client) -> i64 {
    client
        .query_one("SELECT snowflake_watermark()", &[])
        .unwrap()
        .get(0)
}

/// One poll of the recipe: the watermark, then the rows between `last` and it, in order.
fn poll(client: &mut Client, last: i64) -> Vec<i64> {
    let below = watermark(client);
    ids(
        client,
        &format!("SELECT id FROM t WHERE id > {last} AND id < {below} ORDER BY id"),
    )
}

/// Inserts `n` rows in the current transaction (by the column's default, or a batch), returning
/// their IDs.
fn insert(client: &mut Client, n: u64, batch: bool, w: usize) -> Vec<i64> {
    let sql = if batch {
        format!("INSERT INTO t (id, w) SELECT snowflake_nextval_batch({n}), {w} RETURNING id")
    } else {
        format!("INSERT INTO t (w) SELECT {w} FROM generate_series(1, {n}) RETURNING id")
    };
    ids(client, &sql)
}

#[test]
fn a_poller_below_the_watermark_sees_every_committed_row_once_and_in_order() {
    let server = server("watermark");
    let committed = Arc::new(Mutex::new(BTreeSet::<i64>::new()));
    let done = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    // Prepared transactions' names and IDs, committed (or rolled back) later by another
    // connection.
    let prepared = Arc::new(Mutex::new(Vec::<(String, Vec<i64>, bool)>::new()));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (committed, count, prepared) = (committed.clone(), count.clone(), prepared.clone());
            let mut client = server.connect();
            thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((w as u64 + 1) * 0x1234_5678));
                let mut n_tx = 0;
                while count.load(Ordering::Relaxed) < ROWS {
                    n_tx += 1;
                    client.batch_execute("BEGIN").unwrap();
                    let mut mine = Vec::new();
                    for _ in 0..=rng.below(3) {
                        mine.extend(insert(&mut client, 1 + rng.below(40), rng.below(4) == 0, w));
                        if rng.below(3) == 0 {
                            // IDs drawn and never inserted.
                            client.batch_execute("SELECT snowflake_nextval()").unwrap();
                        }
                        thread::sleep(Duration::from_micros(rng.below(3_000)));
                    }
                    if rng.below(5) == 0 {
                        client.batch_execute("SAVEPOINT s").unwrap();
                        insert(&mut client, 1 + rng.below(10), false, w);
                        client.batch_execute("ROLLBACK TO SAVEPOINT s").unwrap();
                    }
                    match rng.below(10) {
                        0 => client.batch_execute("ROLLBACK").unwrap(),
                        1 => {
                            let gid = format!("w{w}_{n_tx}");
                            client
                                .batch_execute(&format!("PREPARE TRANSACTION '{gid}'"))
                                .unwrap();
                            let commit = rng.below(4) != 0;
                            prepared.lock().unwrap().push((gid, mine, commit));
                        }
                        _ => {
                            client.batch_execute("COMMIT").unwrap();
                            count.fetch_add(mine.len(), Ordering::Relaxed);
                            committed.lock().unwrap().extend(mine);
                        }
                    }
                }
            })
        })
        .collect();

    // Finishes the prepared transactions some milliseconds after they were prepared.
    let finisher = {
        let (committed, count, prepared, done) = (
            committed.clone(),
            count.clone(),
            prepared.clone(),
            done.clone(),
        );
        let mut client = server.connect();
        thread::spawn(move || loop {
            let finished = done.load(Ordering::Relaxed);
            thread::sleep(Duration::from_millis(20));
            let batch: Vec<_> = prepared.lock().unwrap().drain(..).collect();
            for (gid, mine, commit) in batch {
                if commit {
                    client
                        .batch_execute(&format!("COMMIT PREPARED '{gid}'"))
                        .unwrap();
                    count.fetch_add(mine.len(), Ordering::Relaxed);
                    committed.lock().unwrap().extend(mine);
                } else {
                    client
                        .batch_execute(&format!("ROLLBACK PREPARED '{gid}'"))
                        .unwrap();
                }
            }
            if finished {
                break;
            }
        })
    };

    // The recipe's poller and the control's, polling until the writers are done, then once more.
    let poller = |with_watermark: bool| {
        let done = done.clone();
        let mut client = server.connect();
        thread::spawn(move || {
            let (mut seen, mut last) = (Vec::<i64>::new(), 0i64);
            let mut out_of_order = 0;
            loop {
                let finished = done.load(Ordering::Relaxed);
                let rows = if with_watermark {
                    poll(&mut client, last)
                } else {
                    ids(
                        &mut client,
                        &format!("SELECT id FROM t WHERE id > {last} ORDER BY id"),
                    )
                };
                if rows.first().is_some_and(|&first| first <= last) {
                    out_of_order += 1;
                }
                if let Some(&max) = rows.last() {
                    last = max;
                }
                seen.extend(rows);
                if finished {
                    break;
                }
                thread::sleep(Duration::from_millis(1));
            }
            (seen, out_of_order)
        })
    };
    let recipe = poller(true);
    let control = poller(false);

    for writer in writers {
        writer.join().unwrap();
    }
    // Every prepared transaction finished before the pollers' last poll.
    while !prepared.lock().unwrap().is_empty() {
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(50));
    done.store(true, Ordering::Relaxed);
    finisher.join().unwrap();
    let (seen, out_of_order) = recipe.join().unwrap();
    let (control_seen, _) = control.join().unwrap();

    let committed = committed.lock().unwrap().clone();
    let in_table: BTreeSet<i64> = ids(&mut server.connect(), "SELECT id FROM t")
        .into_iter()
        .collect();
    assert_eq!(
        in_table, committed,
        "the table holds what the writers committed"
    );
    let control_missed = committed.len() - control_seen.iter().collect::<BTreeSet<_>>().len();
    println!(
        "{} committed rows; the recipe's poller saw {}, the control's missed {control_missed}",
        committed.len(),
        seen.len(),
    );
    assert!(committed.len() >= ROWS);
    assert_eq!(out_of_order, 0);
    assert!(
        seen.windows(2).all(|pair| pair[0] < pair[1]),
        "the recipe's poller saw a row twice or out of order"
    );
    let seen_set: BTreeSet<i64> = seen.iter().copied().collect();
    let missed: Vec<_> = committed.difference(&seen_set).take(5).collect();
    assert!(
        missed.is_empty(),
        "the recipe's poller missed rows: {missed:?}…"
    );
    assert_eq!(seen_set, committed);
    assert!(
        control_missed > 0,
        "the control poller (id > last alone) missed nothing: the run did not reorder commits"
    );
}

#[test]
fn open_transactions_hold_the_watermark_until_they_end() {
    let server = server("watermark_open");
    let mut watcher = server.connect();

    // IDs drawn and never inserted hold it while their transaction is open, not after.
    let mut a = server.connect();
    a.batch_execute("BEGIN").unwrap();
    let drawn: i64 = a
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap()
        .get(0);
    assert!(watermark(&mut watcher) <= drawn);
    a.batch_execute("COMMIT").unwrap();
    assert!(watermark(&mut watcher) > drawn);

    // A subtransaction rolled back: its IDs still hold the watermark until the top level ends.
    a.batch_execute("BEGIN; SAVEPOINT s").unwrap();
    let rolled_back = insert(&mut a, 3, false, 0);
    a.batch_execute("ROLLBACK TO SAVEPOINT s").unwrap();
    assert!(watermark(&mut watcher) <= rolled_back[0]);
    let kept = insert(&mut a, 2, true, 0);
    assert!(watermark(&mut watcher) <= rolled_back[0]);
    a.batch_execute("COMMIT").unwrap();
    let after = watermark(&mut watcher);
    assert!(after > kept[1]);
    // The watermark's own ID is below every later ID.
    let next: i64 = watcher
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap()
        .get(0);
    assert!(next > after);

    // A backend terminated in the middle of its transaction: its FATAL aborts it, and the
    // watermark passes its IDs, which no one ever sees.
    a.batch_execute("BEGIN").unwrap();
    let lost = insert(&mut a, 5, false, 0);
    let pid: i32 = a.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    assert!(watermark(&mut watcher) <= lost[0]);
    watcher
        .batch_execute(&format!("SELECT pg_terminate_backend({pid})"))
        .unwrap();
    wait_until(
        Duration::from_secs(10),
        "the terminated backend's exit",
        || watermark(&mut watcher) > lost[4],
    );
    let visible: i64 = watcher
        .query_one(
            &format!("SELECT count(*) FROM t WHERE id >= {}", lost[0]),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(visible, 0);
}

#[test]
fn a_prepared_transaction_holds_the_watermark_across_a_backend_kill_and_a_crash() {
    let server = server("watermark_crash");
    let mut a = server.connect();
    a.batch_execute("BEGIN").unwrap();
    let held = insert(&mut a, 10, false, 0);
    a.batch_execute("PREPARE TRANSACTION 'held'").unwrap();
    let mut watcher = server.connect();
    let before = watermark(&mut watcher);
    assert!(before <= held[0], "{before} > {}", held[0]);
    // Later rows commit meanwhile.
    let later = insert(&mut watcher, 10, false, 1);
    assert!(watermark(&mut watcher) <= held[0]);

    // SIGKILL of one backend: the postmaster reinitialises shared memory (the slots and the
    // prepared table with it); the prepared transaction comes back, its IDs unknown.
    let pid: i32 = watcher
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);
    let logged = server.log().len();
    server.as_postgres(&format!("kill -9 {pid}"));
    // The postmaster learns of the death only when it reaps the child: a connection made before
    // then is ended by the reinitialisation. Connect once the server says it is ready again.
    wait_until(
        Duration::from_secs(60),
        "the server to reinitialise after the backend's kill -9",
        || !log_lines_since(&server, logged, "ready to accept connections").is_empty(),
    );
    let mut watcher = server.reconnect();
    let after_kill = watermark(&mut watcher);
    assert!(after_kill <= held[0], "{after_kill} > {}", held[0]);

    // A crash of the whole server and a restart: the same.
    server.crash();
    server.start_again();
    let mut watcher = server.reconnect();
    let after_crash = watermark(&mut watcher);
    assert!(after_crash <= held[0], "{after_crash} > {}", held[0]);
    let pending: i64 = watcher
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        pending,
        later.len() as i64,
        "the prepared rows are not visible yet"
    );

    watcher.batch_execute("COMMIT PREPARED 'held'").unwrap();
    let committed = watermark(&mut watcher);
    assert!(committed > *later.last().unwrap());
    let rows = poll(&mut watcher, 0);
    assert_eq!(rows.len(), held.len() + later.len());
}

#[test]
fn a_standby_refuses_with_a_hint() {
    let primary = Server::start("watermark_primary", Config::node(5));
    let standby = Server::standby_of(&primary, "watermark_standby", Config::default());
    let refused = standby
        .connect()
        .query_one("SELECT snowflake_watermark()", &[])
        .unwrap_err();
    assert_error(
        &refused,
        "55000",
        "cannot take a snowflake watermark during recovery",
        Some(
            "A standby does not know which of its primary's transactions that drew IDs are \
             still open.",
        ),
        Some(
            "Take the watermark on the primary and poll the primary; or read on the standby with \
             the primary's watermark once pg_last_wal_replay_lsn() has passed the primary's \
             pg_current_wal_lsn() taken after it.",
        ),
    );
}
