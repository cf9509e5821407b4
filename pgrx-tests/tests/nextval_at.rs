//! `snowflake_nextval_at(ts)`: old rows re-keyed by their `created_at` under the backfill node
//! id. A million rows (100,000 on the majors other than the newest) re-keyed in committed
//! batches while live inserts go on: no duplicate, every ID at its row's instant. A kill -9 of the server in the middle of a backfill, resumed: no ID
//! made twice, not even one a client saw in a batch that was never committed. The refusals, word
//! for word, on a standby too, and a promoted standby continuing above its primary's ceiling. A
//! node id the server used before, and a damaged backfill file, refused.

use postgres::Client;
use snowflake_it::{assert_error, wait_until, Config, Server};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const BACKFILL_NODE: i32 = 1000;

fn config() -> Config {
    Config::node(1).setting(&format!("pg_snowflake.backfill_node_id = {BACKFILL_NODE}"))
}

/// 64 sequence numbers an instant.
fn narrow() -> Config {
    config().setting("pg_snowflake.sequence_bits = 6")
}

/// `rows` old rows keyed by a serial `old_id`, `created_at` spread over the past ten days in a
/// scrambled order, about three rows an instant (ties), `id` to be filled.
fn old_rows(client: &mut Client, rows: i64) {
    client
        .batch_execute(&format!(
            "CREATE TABLE old (old_id bigint PRIMARY KEY, created_at timestamptz NOT NULL, id bigint);
             INSERT INTO old (old_id, created_at)
             SELECT g, date_trunc('day', now()) - interval '10 days'
                       + ((g::bigint * 7919) % ({rows} / 3)) * (interval '10 days' / ({rows} / 3))
             FROM generate_series(1, {rows}) g;
             CREATE INDEX ON old (created_at, old_id);
             ANALYZE old;"
        ))
        .unwrap();
}

/// What a batch made: the new IDs, and its last row (created_at as text, old_id).
type Batch = (Vec<i64>, (String, i64));

/// One batch of the backfill: the next `n` rows after `after` (created_at as text, old_id) in
/// ascending order re-keyed, in its own transaction. Returns the new IDs (as the client saw
/// them, before the commit) and the batch's last row, or `None` when nothing is left. `commit`:
/// whether to commit (false: the statement runs, the transaction stays open).
fn batch(
    client: &mut Client,
    after: &(String, i64),
    n: i64,
    commit: bool,
) -> Result<Option<Batch>, postgres::Error> {
    let mut tx = client.transaction()?;
    let rows = tx.query(
        "UPDATE old o SET id = k.new_id
         FROM (SELECT old_id, created_at, snowflake_nextval_at(created_at) AS new_id
               FROM old
               WHERE (created_at, old_id) > ($1::text::timestamptz, $2)
               ORDER BY created_at, old_id LIMIT $3) k
         WHERE o.old_id = k.old_id
         RETURNING k.new_id, k.created_at::text, k.old_id, k.created_at",
        &[&after.0, &after.1, &n],
    )?;
    if rows.is_empty() {
        return Ok(None);
    }
    let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    let last = rows
        .iter()
        .max_by_key(|r| (r.get::<_, std::time::SystemTime>(3), r.get::<_, i64>(2)))
        .map(|r| (r.get::<_, String>(1), r.get::<_, i64>(2)))
        .unwrap();
    if commit {
        tx.commit()?;
    } else {
        std::mem::forget(tx);
    }
    Ok(Some((ids, last)))
}

const START: (&str, i64) = ("-infinity", 0);

fn start() -> (String, i64) {
    (START.0.to_string(), START.1)
}

/// The checks of a finished backfill: every old row keyed, no ID twice among old and live rows,
/// every old row's ID at its `created_at` (to the millisecond, the default layout's unit) and
/// under the backfill node id. The IDs are counted distinct by a sort: a hash aggregate
/// `GROUP BY id HAVING count(*) > 1` over a million rows spilled, and at each refill cleared and
/// walked its whole bucket array (11 minutes of CPU in one run, where the run before took 36 s).
fn check_rekeyed(client: &mut Client, rows: i64) {
    let row = client
        .query_one(
            "SELECT count(id),
                    (SELECT count(*) - count(DISTINCT id)
                     FROM (SELECT id FROM old UNION ALL SELECT id FROM live) a),
                    count(*) FILTER (WHERE snowflake_timestamp(id)
                                           <> date_trunc('milliseconds', created_at)),
                    count(*) FILTER (WHERE snowflake_node_id(id) <> $1),
                    (SELECT count(*) FROM live)
             FROM old",
            &[&BACKFILL_NODE],
        )
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), rows, "every old row re-keyed");
    assert_eq!(row.get::<_, i64>(1), 0, "IDs made twice");
    assert_eq!(row.get::<_, i64>(2), 0, "IDs not at their row's instant");
    assert_eq!(row.get::<_, i64>(3), 0, "IDs under another node id");
}

/// Live inserts by `DEFAULT snowflake_nextval()` from `clients` connections until `stop`.
fn live_inserts(
    server: &Server,
    clients: usize,
    stop: Arc<AtomicBool>,
) -> Vec<thread::JoinHandle<()>> {
    (0..clients)
        .map(|_| {
            let mut client = server.connect();
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if client
                        .execute("INSERT INTO live SELECT FROM generate_series(1, 100)", &[])
                        .is_err()
                    {
                        break;
                    }
                }
            })
        })
        .collect()
}

/// On the newest major; every major re-keys 100,000 rows the same way (the cursor's arithmetic
/// and the live IDs beside it do not differ between majors: shared memory, WAL and the planner
/// are met as well by fewer rows).
#[test]
fn a_million_rows_rekeyed_beside_live_inserts() {
    rekeyed_beside_live_inserts("nextval_at_million", 1_000_000);
}

#[test]
fn rows_rekeyed_beside_live_inserts() {
    rekeyed_beside_live_inserts("nextval_at_rows", 100_000);
}

fn rekeyed_beside_live_inserts(name: &str, rows: i64) {
    // Each step's seconds are printed: one run of the million took 677 s, of which the re-keying
    // was 20 s, and nothing said where the rest went.
    let started = Instant::now();
    let server = Server::start(name, config());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE live (id bigint PRIMARY KEY DEFAULT snowflake_nextval());")
        .unwrap();
    old_rows(&mut client, rows);
    let stop = Arc::new(AtomicBool::new(false));
    let inserters = live_inserts(&server, 2, stop.clone());
    let began = Instant::now();
    let mut after = start();
    let mut batches = 0;
    while let Some((_, last)) = batch(&mut client, &after, rows / 20, true).unwrap() {
        after = last;
        batches += 1;
    }
    let took = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    for inserter in inserters {
        inserter.join().unwrap();
    }
    let live: i64 = server.query_one("SELECT count(*) FROM live");
    eprintln!(
        "{rows} rows re-keyed in {batches} batches in {took:?} ({:?} to make them before), \
         {live} live rows beside",
        began - started
    );
    assert!(live > 0, "live inserts ran beside the backfill");
    let checking = Instant::now();
    check_rekeyed(&mut client, rows);
    eprintln!("checked in {:?}", checking.elapsed());
    drop(client);
    let stopping = Instant::now();
    drop(server);
    eprintln!("the server stopped and removed in {:?}", stopping.elapsed());
}

/// Resumes the backfill after `after` until nothing is left; returns the IDs made.
fn resume(client: &mut Client, after: &mut (String, i64), n: i64) -> Vec<i64> {
    let mut made = vec![];
    while let Some((ids, last)) = batch(client, after, n, true).unwrap() {
        made.extend(ids);
        *after = last;
    }
    made
}

#[test]
fn a_kill_9_in_the_middle_of_a_backfill_then_resumed() {
    const ROWS: i64 = 200_000;
    let server = Server::start("nextval_at_crash", config());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE live (id bigint PRIMARY KEY DEFAULT snowflake_nextval());")
        .unwrap();
    old_rows(&mut client, ROWS);
    // Every ID a client saw, committed or not.
    let mut seen = HashSet::new();
    let mut after = start();
    for _ in 0..3 {
        let (ids, last) = batch(&mut client, &after, 20_000, true).unwrap().unwrap();
        seen.extend(ids);
        after = last;
    }
    // A batch whose IDs the client saw, never committed: the server is killed (kill -9 of the
    // postmaster and every process) first.
    let (uncommitted, _) = batch(&mut client, &after, 20_000, false).unwrap().unwrap();
    seen.extend(uncommitted);
    server.crash();
    server.start_again();
    let mut client = server.connect();
    let committed: i64 = client
        .query_one("SELECT count(id) FROM old", &[])
        .unwrap()
        .get(0);
    assert_eq!(committed, 60_000, "the killed batch was not committed");
    // Resumed from the last committed row, the killed batch's instants again: two batches.
    let mut resumed = vec![];
    for _ in 0..2 {
        let (ids, last) = batch(&mut client, &after, 20_000, true).unwrap().unwrap();
        resumed.extend(ids);
        after = last;
    }
    // Another batch seen and never committed: its backend is killed (kill -9), and the
    // postmaster reinitialises the shared memory.
    let (uncommitted, _) = batch(&mut client, &after, 20_000, false).unwrap().unwrap();
    let uncommitted: HashSet<i64> = uncommitted.into_iter().collect();
    let pid: i32 = server
        .query_one("SELECT min(pid) FROM pg_stat_activity WHERE state = 'idle in transaction'");
    let logged = server.log().len();
    server.as_postgres(&format!("kill -9 {pid}"));
    wait_until(
        Duration::from_secs(60),
        "the server to reinitialise after the backend's kill -9",
        || {
            server.log()[logged..]
                .lines()
                .any(|line| line.contains("ready to accept connections"))
        },
    );
    let mut client = server.reconnect();
    resumed.extend(resume(&mut client, &mut after, 20_000));
    let again: Vec<_> = resumed
        .iter()
        .filter(|id| seen.contains(id) || uncommitted.contains(id))
        .take(5)
        .collect();
    assert!(
        again.is_empty(),
        "IDs made again after a kill -9: {again:?} (of {} seen before)",
        seen.len()
    );
    seen.extend(uncommitted);
    seen.extend(resumed);
    // A clean restart, and the rows re-keyed once more from the start: new IDs again.
    server.stop();
    server.start_again();
    let mut client = server.connect();
    let rekeyed = resume(&mut client, &mut start(), 50_000);
    assert!(
        !rekeyed.iter().any(|id| seen.contains(id)),
        "IDs made again after a clean restart"
    );
    check_rekeyed(&mut client, ROWS);
}

/// The refusals, word for word (the unset setting's is in the golden files), NULL, the cursor,
/// an exhausted instant and a spent node id, a standby, and a promoted standby continuing above
/// its primary's ceiling. A narrow sequence field (64 numbers an instant) keeps it short.
#[test]
fn refusals_a_standby_and_a_promotion() {
    let primary = Server::start("nextval_at_refusals", narrow());
    let mut client = primary.connect();
    client.batch_execute("SET timezone = 'UTC'").unwrap();
    let at = |client: &mut Client, ts: &str| {
        client
            .query_one("SELECT snowflake_nextval_at($1::text::timestamptz)", &[&ts])
            .map(|r| r.get::<_, Option<i64>>(0))
    };
    assert!(client
        .query_one("SELECT snowflake_nextval_at(NULL) IS NULL", &[])
        .unwrap()
        .get::<_, bool>(0));
    let err = at(&mut client, "infinity").unwrap_err();
    assert_error(
        &err,
        "22023",
        "timestamp infinity is in the future",
        Some(
            "snowflake_nextval_at stamps IDs at past instants only; the present and the future \
             belong to snowflake_nextval().",
        ),
        Some("Pass an instant not after now(), or use snowflake_nextval() for new rows."),
    );
    let err = at(&mut client, "2023-12-31 23:59:59.999+00").unwrap_err();
    assert_error(
        &err,
        "22008",
        "timestamp 2023-12-31 23:59:59.999 UTC is before the snowflake epoch",
        Some("Snowflake IDs count time from 2024-01-01 00:00:00.000 UTC."),
        Some(
            "Rows older than the epoch cannot be stamped at their instant: key them at the \
             epoch, or choose an earlier pg_snowflake.epoch for a new cluster.",
        ),
    );
    let t = "2025-03-01 12:00:00.5+00";
    let first = at(&mut client, t).unwrap().unwrap();
    let err = at(&mut client, "2025-03-01 12:00:00.499+00").unwrap_err();
    assert_error(
        &err,
        "55000",
        "timestamp 2025-03-01 12:00:00.499 UTC is before the backfill cursor",
        Some(
            "This server has stamped an ID at 2025-03-01 12:00:00.500 UTC since it started; \
             instants passed to snowflake_nextval_at must not decrease, across every session.",
        ),
        Some(
            "Re-key rows in ascending order of their instant, one backfill at a time (ORDER BY \
             the timestamp); after a restart the cursor starts afresh.",
        ),
    );
    // The primary's IDs at t reach a standby's ceiling through the WAL.
    let standby = Server::standby_of(&primary, "nextval_at_refusals_standby", narrow());
    let mut on_standby = standby.connect();
    let err = at(&mut on_standby, t).unwrap_err();
    assert_error(
        &err,
        "25006",
        "cannot make snowflake IDs for past instants during recovery",
        None,
        Some(
            "Re-key rows on the primary. A standby follows the backfill's ceiling through the \
             WAL and continues it once promoted.",
        ),
    );
    let mut at_t = vec![first];
    for _ in 0..20 {
        at_t.push(at(&mut client, t).unwrap().unwrap());
    }
    // 21 IDs at t: sequence numbers 0 to 20, under a ceiling raised to 32 (blocks of 16).
    primary.stop();
    standby.promote();
    wait_until(Duration::from_secs(30), "the promotion", || {
        !standby.query_one::<bool>("SELECT pg_is_in_recovery()")
    });
    // The promoted standby continues above the ceiling it replayed: 32 to 63 at t, then the
    // refusal; never stamped at another instant.
    let mut on_standby = standby.connect();
    for _ in 32..64 {
        at_t.push(at(&mut on_standby, t).unwrap().unwrap());
    }
    let seqs: Vec<i64> = at_t.iter().map(|id| id & 63).collect();
    assert_eq!(seqs, (0..21).chain(32..64).collect::<Vec<_>>());
    assert!(
        at_t.iter().all(|id| id >> 6 == first >> 6),
        "every ID at t, under the backfill node id"
    );
    let err = at(&mut on_standby, t).unwrap_err();
    assert_error(
        &err,
        "54000",
        "no snowflake sequence number is left at 2025-03-01 12:00:00.500 UTC for backfill node \
         id 1000",
        Some(
            "Sequence numbers 32 to 63 of this instant are used; those below 32 went to earlier \
             runs of the backfill (each restart sets aside those it may have used, at every \
             instant).",
        ),
        Some(
            "Set pg_snowflake.backfill_node_id to another node id never used for live IDs, \
             restart, and continue; or key the remaining rows of this instant with \
             snowflake_nextval().",
        ),
    );
    // A clean restart: every number of every instant went to the runs before; the node id is
    // spent.
    standby.stop();
    standby.start_again();
    let mut client = standby.connect();
    let err = at(&mut client, "2025-03-02 00:00:00+00").unwrap_err();
    assert_error(
        &err,
        "54000",
        "no snowflake sequence number is left at 2025-03-02 00:00:00.000 UTC for backfill node \
         id 1000",
        Some(
            "Every sequence number (0 to 63) went to earlier runs of the backfill (each restart \
             sets aside those it may have used, at every instant).",
        ),
        None,
    );
}

#[test]
fn the_live_node_id_is_refused_as_the_backfill_node_id() {
    let server = Server::start(
        "nextval_at_live",
        Config::node(7).setting("pg_snowflake.backfill_node_id = 7"),
    );
    let mut client = server.connect();
    let err = client
        .query_one("SELECT snowflake_nextval_at(now() - interval '1 day')", &[])
        .unwrap_err();
    assert_error(
        &err,
        "22023",
        "pg_snowflake.backfill_node_id 7 is this server's live node id",
        Some(
            "Live IDs of a node id cover every instant from the epoch on: an ID stamped at a past \
             instant under it could equal one of them.",
        ),
        Some(
            "pg_snowflake.backfill_node_id must name a node id that no server or application \
             ever uses for live IDs, distinct per server, as node_id is.",
        ),
    );
}

/// The ceiling is confirmed by the synchronous standby before any ID under it is made, even in a
/// session that re-keys with `synchronous_commit = off` (as bulk loads often do): with the
/// standby's WAL receiver stopped, the call waits (its statement timeout held back, as for a
/// backend's own reservation) and returns once the standby receives again.
#[test]
fn the_ceiling_waits_for_the_synchronous_standby_even_with_synchronous_commit_off() {
    let primary = Server::start("nextval_at_sync", config());
    let standby = Server::standby_of(&primary, "nextval_at_sync_standby", config());
    primary.make_standby_synchronous();
    let receiver: i32 = standby.query_one("SELECT pid FROM pg_stat_wal_receiver");
    standby.as_postgres(&format!("kill -STOP {receiver}"));
    let mut client = primary.connect();
    client
        .batch_execute("SET synchronous_commit = off; SET statement_timeout = '1s'")
        .unwrap();
    let (sender, answer) = std::sync::mpsc::channel();
    let call = thread::spawn(move || {
        let result = client.query_one("SELECT snowflake_nextval_at('2025-06-01 00:00:00+00')", &[]);
        sender.send(result.map(|row| row.get::<_, i64>(0))).unwrap();
    });
    assert!(
        answer.recv_timeout(Duration::from_secs(3)).is_err(),
        "the call returned before the synchronous standby confirmed the ceiling"
    );
    standby.as_postgres(&format!("kill -CONT {receiver}"));
    let result = answer.recv_timeout(Duration::from_secs(30)).unwrap();
    call.join().unwrap();
    // The ID was made under the confirmed ceiling; the statement timeout, held back, may end
    // the statement after it.
    match result {
        Ok(id) => assert_eq!(id & 0xfff, 0, "the first ID of the instant"),
        Err(err) => {
            assert_error(
                &err,
                "57014",
                "canceling statement due to statement timeout",
                None,
                None,
            );
        }
    }
}

/// A node id this server made live IDs under before (its state file lists it) is refused as
/// the backfill node id; and a backfill file that cannot be read as one is refused, not taken
/// for an empty one (which would start every instant's sequence numbers from 0 again): once the
/// file is put back, the backfill goes on above what it had made.
#[test]
fn a_node_id_used_before_and_a_damaged_backfill_file_are_refused() {
    let server = Server::start(
        "nextval_at_history",
        Config::node(7).setting("pg_snowflake.backfill_node_id = 8"),
    );
    let mut client = server.connect();
    let instant = "'2025-06-01 00:00:00+00'";
    let made: Vec<i64> = (0..3)
        .map(|_| {
            client
                .query_one(&format!("SELECT snowflake_nextval_at({instant})"), &[])
                .unwrap()
                .get(0)
        })
        .collect();
    client.query_one("SELECT snowflake_nextval()", &[]).unwrap();

    // The settings, then a restart (between its stop and start, `meanwhile` runs); then a call.
    let restarted = |settings: &[&str], meanwhile: &dyn Fn()| {
        for setting in settings {
            server.execute(&format!("ALTER SYSTEM SET {setting}"));
        }
        server.stop();
        meanwhile();
        server.start_again();
        server
            .connect()
            .query_one(&format!("SELECT snowflake_nextval_at({instant})"), &[])
    };

    // The live node id becomes 9, the backfill's 7: the one the server made live IDs under.
    let err = restarted(
        &[
            "pg_snowflake.node_id = 9",
            "pg_snowflake.backfill_node_id = 7",
        ],
        &|| {},
    )
    .unwrap_err();
    assert_error(
        &err,
        "22023",
        "pg_snowflake.backfill_node_id 7 made live IDs on this server before",
        Some(
            "The server's state file lists it among the node ids used here: an ID stamped at a \
             past instant under it could equal one of them.",
        ),
        Some(
            "pg_snowflake.backfill_node_id must name a node id that no server or application \
             ever uses for live IDs, distinct per server, as node_id is.",
        ),
    );

    // Back to backfill node id 8, its file damaged.
    let file = server.data_file("pg_snowflake_backfill.state");
    let err = restarted(&["pg_snowflake.backfill_node_id = 8"], &|| {
        server.as_postgres(&format!(
            "cp {file} {file}.kept && echo 'not a backfill file' > {file}"
        ))
    })
    .unwrap_err();
    assert_error(
        &err,
        "58030",
        "could not read the backfill file \"pg_snowflake_backfill.state\": it is damaged: …",
        Some(
            "The file holds the sequence numbers the backfill has used; without it the server \
             could stamp an ID it has stamped before.",
        ),
        Some(
            "Check the data directory's disk and permissions. A damaged file is not replaced: \
             restore it from a backup, or set pg_snowflake.backfill_node_id to a node id never \
             used before.",
        ),
    );

    // The file put back (the server reads it at the run's first call): above what was made.
    let next: i64 = restarted(&[], &|| {
        server.as_postgres(&format!("cp {file}.kept {file}"))
    })
    .unwrap()
    .get(0);
    assert!(
        made.iter().all(|&id| next > id),
        "{next} is not above the backfill's earlier IDs {made:?}"
    );
}
